// StageBuilder's memory bookkeeping: which allocation stands for which tensor
// of the layer being built, and the checks that tie the graph's allocations
// to activation_tensors() (megatron_shapes.h), so the two cannot drift.
#include <algorithm>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "util/check.h"
#include "workload/megatron_stage.h"

namespace prism::megatron {

int StageBuilder::alloc(std::int64_t bytes, std::string_view name) {
  return b_.alloc(kCompute, Bytes{bytes}, name);
}

// The free carries its alloc's name, so a graph reads "alloc X ... free X".
void StageBuilder::free(int alloc_op, std::int32_t record_streams) {
  PRISM_CHECK(alloc_op >= 0 && b_.op(alloc_op).kind == OpKind::kAlloc, "free of a non-alloc");
  const std::string name = b_.role().names[b_.op(alloc_op).name];
  b_.free_masked(kCompute, alloc_op, record_streams, name);
}

static const ActivationTensor* find(const std::vector<ActivationTensor>& list,
                                    std::string_view tensor) {
  const auto it = std::find_if(list.begin(), list.end(),
                               [&](const ActivationTensor& t) { return t.name == tensor; });
  return it == list.end() ? nullptr : &*it;
}

bool StageBuilder::is_kept(std::string_view tensor) const {
  return find(*keeping_, tensor) != nullptr;
}

bool StageBuilder::holds(std::string_view tensor) const {
  return layer_.find(tensor) != layer_.end();
}

const std::vector<ActivationTensor>& StageBuilder::kept_by(int chunk, int layer) const {
  const LayerRecompute r = layer_recompute(job_.training, layer, chunk_layers_[chunk]);
  if (job_.training.recompute != Recompute::kFull) return kept_;
  if (!r.recomputed) return all_tensors_;
  return layer == r.first ? kept_ : nothing_;
}

// Kept tensors are "act.<tensor>"; full recompute's re-made ones
// "recomputed.<tensor>"; the rest (a forward under full or selective
// recompute makes them and drops them again) are transients named plainly.
std::string StageBuilder::tensor_name(std::string_view tensor) const {
  if (pass_ == Pass::kRecompute) return fmt::format("recomputed.{}", tensor);
  if (is_kept(tensor)) return fmt::format("act.{}", tensor);
  return std::string(tensor);
}

void StageBuilder::save(std::string_view tensor) {
  const ActivationTensor* t = find(all_tensors_, tensor);
  PRISM_CHECK(t != nullptr, fmt::format("'{}' is not an activation tensor", tensor));
  const int op = alloc(t->bytes, tensor_name(tensor));
  const bool inserted = layer_.try_emplace(std::string(tensor), Held{op, 0}).second;
  PRISM_CHECK(inserted, fmt::format("activation '{}' allocated twice", tensor));
}

int StageBuilder::keep(std::string_view tensor, std::int64_t bytes) {
  const int op = alloc(bytes, fmt::format("act.{}", tensor));
  const bool inserted = layer_.try_emplace(std::string(tensor), Held{op, 0}).second;
  PRISM_CHECK(inserted, fmt::format("activation '{}' allocated twice", tensor));
  return op;
}

void StageBuilder::release(std::string_view tensor) {
  const auto it = layer_.find(tensor);
  PRISM_CHECK(it != layer_.end(), fmt::format("release of '{}', which is not held", tensor));
  free(it->second);
  layer_.erase(it);
}

// Megatron's column-parallel linear with SP keeps its input sequence-sharded
// and all-gathers it into a fresh full-sequence buffer for the forward GEMM
// and again for the weight gradient (linear_with_grad_accumulation).
int StageBuilder::gathered_input(std::string_view tensor) {
  if (!x_.sp) return -1;
  return alloc(kBf16 * x_.T * x_.h, fmt::format("gathered.{}", tensor));
}

// A forward ends holding exactly the tensors the job keeps: what else it made
// (full recompute runs the forward without autograd) is dropped here.
void StageBuilder::end_layer_forward() {
  if (pass_ == Pass::kRecompute) {
    check_holds(all_tensors_);
    return;
  }
  for (auto it = layer_.begin(); it != layer_.end();) {
    if (is_kept(it->first)) {
      ++it;
      continue;
    }
    free(it->second);
    it = layer_.erase(it);
  }
  check_holds(*keeping_);
}

void StageBuilder::check_holds(const std::vector<ActivationTensor>& tensors) const {
  PRISM_CHECK(layer_.size() == tensors.size(),
              fmt::format("a layer holds {} tensors, not the {} of its list", layer_.size(),
                          tensors.size()));
  for (const ActivationTensor& t : tensors) {
    const auto it = layer_.find(t.name);
    PRISM_CHECK(it != layer_.end(), fmt::format("activation '{}' was not allocated", t.name));
    PRISM_CHECK(b_.op(it->second.op).bytes.count == t.bytes,
                fmt::format("activation '{}' allocated with the wrong size", t.name));
  }
}

HeldTensors StageBuilder::take_saved(int chunk, int mb, int item) {
  const auto it = saved_.find({chunk, mb, item});
  PRISM_CHECK(it != saved_.end(), "backward of a forward that did not run");
  HeldTensors held = std::move(it->second);
  saved_.erase(it);
  return held;
}

}  // namespace prism::megatron
