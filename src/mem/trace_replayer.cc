#include "mem/trace_replayer.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include <fmt/format.h>

namespace prism::snapshot_internal {
namespace {

using Action = AllocatorEvent::Action;

bool same(const AllocatorEvent& a, const AllocatorEvent& b) {
  // An oom's addr is the device's free memory, which the model cannot know.
  return a.action == b.action && a.size == b.size && a.stream == b.stream &&
         (a.action == Action::kOom || a.addr == b.addr);
}

bool is_release(Action a) {
  return a == Action::kSegmentFree || a == Action::kSegmentUnmap || a == Action::kFreeCompleted;
}

// The calls that can produce a run of releases and completions before a
// malloc that needs device memory (or fails), in the order they are tried.
enum class RunCall : std::uint8_t {
  kCompleteThenMalloc,  // completions first (process_events), as long as
                        // they would not serve the malloc; then the malloc
  kCompleteAll,         // completions (process_events), then the malloc
  kEmptyCache,          // empty_cache(), then the malloc
  kMallocFirst,         // all of it inside the malloc
};

}  // namespace

// --- TraceReplayer --------------------------------------------------------

TraceReplayer::TraceReplayer(const MemoryTrace& trace, const SnapshotReplayOptions& options,
                             const Choices& choices)
    : trace_(trace),
      config_(options.config),
      choices_(choices),
      device_(this, options.capacity, options.device_memory),
      allocator_(options.config, &device_) {
  allocator_.set_observer([this](const AllocatorEvent& e) { observe(e); });
}

Status TraceReplayer::run() {
  while (!divergence_ && next_ < size()) {
    std::erase_if(open_, [&](const OpenChoice& c) { return next_ > c.end; });
    const std::size_t before = next_;
    PRISM_RETURN_IF_ERROR(step());
    if (!divergence_ && next_ == before) diverge(std::nullopt);  // the model did nothing here
  }
  return Status::ok();
}

const AllocatorEvent* TraceReplayer::peek() const {
  return divergence_ || next_ >= size() ? nullptr : &expected(next_);
}

void TraceReplayer::observe(const AllocatorEvent& e) {
  if (divergence_) return;
  if (next_ >= size() || !same(e, expected(next_))) return diverge(e);
  ++next_;
}

void TraceReplayer::diverge(const std::optional<AllocatorEvent>& got) {
  Divergence d;
  d.entry = next_ < size() ? trace_.events[next_].entry : trace_.num_entries;
  if (next_ < size()) d.expected = expected(next_);
  d.got = got;
  divergence_ = std::move(d);
  for (auto c = open_.rbegin(); c != open_.rend(); ++c) {
    if (next_ <= c->end && c->taken + 1 < c->count) {
      retry_ = std::make_pair(c->run, c->taken + 1);
      break;
    }
  }
}

Status TraceReplayer::step() {
  const AllocatorEvent& e = expected(next_);
  switch (e.action) {
    case Action::kAlloc:
    case Action::kOom:
      malloc_for(next_);
      return Status::ok();
    case Action::kSegmentAlloc:
    case Action::kSegmentMap: {
      PRISM_ASSIGN_OR_RETURN(const std::size_t request, request_after(next_));
      malloc_for(request);
      return Status::ok();
    }
    case Action::kFreeRequested:
      return free_block(e);
    case Action::kFreeCompleted:
    case Action::kSegmentFree:
    case Action::kSegmentUnmap:
      return release_run();
  }
  return Status::ok();
}

Result<std::size_t> TraceReplayer::request_after(std::size_t i) const {
  std::size_t j = i;
  while (j < size() && expected(j).action != Action::kAlloc && expected(j).action != Action::kOom &&
         expected(j).action != Action::kFreeRequested)
    ++j;
  if (j == size() || expected(j).action == Action::kFreeRequested)
    return Status::invalid_argument(
        fmt::format("trace entry {} ({}): no alloc or oom follows, as one must after a segment "
                    "is allocated: the trace is inconsistent",
                    trace_.events[i].entry, action_name(expected(i).action)));
  return j;
}

void TraceReplayer::malloc_for(std::size_t i) {
  const AllocatorEvent& e = expected(i);
  request_stream_ = e.stream;
  request_small_ = round_request(e.size, config_) <= kSmallSize;
  const BlockId b = allocator_.malloc(e.size, e.stream);
  if (b != kOutOfMemory) live_[allocator_.address(b)] = b;
}

Status TraceReplayer::free_block(const AllocatorEvent& e) {
  const auto it = live_.find(e.addr);
  if (it == live_.end()) return Status::ok();  // the model has no block there: nothing happens
  // torch's free() records free_completed right after free_requested unless
  // the block waits for other streams (record_stream); one whose streams
  // were done by the next malloc records the same pair, to the same effect.
  // When a malloc's fallbacks follow, the completion may be theirs (the
  // synchronize after a failed search): the block was not there to find.
  bool now = next_ + 1 < size() && expected(next_ + 1).action == Action::kFreeCompleted &&
             expected(next_ + 1).addr == e.addr;
  if (now) {
    PRISM_ASSIGN_OR_RETURN(const std::optional<std::size_t> request,
                           malloc_after(run_end(next_ + 2)));
    if (request) {
      const int taken = choice_at(next_, 2);
      open_.push_back(OpenChoice{next_, *request, taken, 2});
      now = taken == 0;
    }
  }
  if (now) {
    allocator_.free(it->second);
  } else {
    pending_[e.addr] = allocator_.free_deferred(it->second);
  }
  live_.erase(it);
  return Status::ok();
}

std::size_t TraceReplayer::run_end(std::size_t i) const {
  while (i < size() && is_release(expected(i).action)) ++i;
  return i;
}

Result<std::optional<std::size_t>> TraceReplayer::malloc_after(std::size_t i) const {
  if (malloc_follows(i)) {
    PRISM_ASSIGN_OR_RETURN(const std::size_t request, request_after(i));
    return std::optional<std::size_t>(request);
  }
  // With expandable segments the retry may find room without mapping pages.
  if (config_.expandable_segments && i < size() && expected(i).action == Action::kAlloc)
    return std::optional<std::size_t>(i);
  return std::optional<std::size_t>();
}

bool TraceReplayer::malloc_follows(std::size_t i) const {
  return i < size() &&
         (expected(i).action == Action::kSegmentAlloc ||
          expected(i).action == Action::kSegmentMap || expected(i).action == Action::kOom);
}

int TraceReplayer::choice_at(std::size_t run, int count) const {
  const auto it = choices_.find(run);
  return it == choices_.end() ? 0 : std::min(it->second, count - 1);
}

void TraceReplayer::complete(const AllocatorEvent& e) {
  const auto it = pending_.find(e.addr);
  if (it == pending_.end()) return;
  const std::uint64_t ticket = it->second;
  pending_.erase(it);
  allocator_.complete_free(ticket);
}

Status TraceReplayer::release_run() {
  const std::size_t j = run_end(next_);
  bool releases = false;
  for (std::size_t i = next_; i < j; ++i)
    releases = releases || expected(i).action != Action::kFreeCompleted;
  PRISM_ASSIGN_OR_RETURN(const std::optional<std::size_t> request, malloc_after(j));
  if (!request) {
    if (!releases) {  // the streams are done with the block
      complete(expected(next_));
      return Status::ok();
    }
    complete_leading(j, nullptr);  // empty_cache() synchronizes first
    if (!divergence_) allocator_.empty_cache();
    return Status::ok();
  }
  const AllocatorEvent& req = expected(*request);
  const bool completions = expected(next_).action == Action::kFreeCompleted;
  // Every call that fits the run, the likeliest first.
  std::vector<RunCall> order;
  if (releases && cache_fits(req, {})) {  // the malloc's search would have succeeded
    order = {RunCall::kEmptyCache, RunCall::kCompleteThenMalloc, RunCall::kMallocFirst,
             RunCall::kCompleteAll};
  } else if (malloc_follows(j)) {
    order = {RunCall::kCompleteThenMalloc, RunCall::kEmptyCache, RunCall::kMallocFirst,
             RunCall::kCompleteAll};
  } else {  // an alloc the malloc's retry found room for in an expandable segment
    order = {RunCall::kEmptyCache, RunCall::kCompleteAll, RunCall::kCompleteThenMalloc,
             RunCall::kMallocFirst};
  }
  const auto applies = [&](RunCall c) {
    switch (c) {
      case RunCall::kCompleteThenMalloc:
        return true;
      case RunCall::kEmptyCache:
        return releases;
      case RunCall::kMallocFirst:
        return completions;
      case RunCall::kCompleteAll:  // with releases, they would stay unexplained
        return completions && !releases;
    }
    return false;
  };
  std::vector<RunCall> calls;
  std::copy_if(order.begin(), order.end(), std::back_inserter(calls), applies);
  const int taken = choice_at(next_, static_cast<int>(calls.size()));
  open_.push_back(OpenChoice{next_, *request, taken, static_cast<int>(calls.size())});
  switch (calls[static_cast<std::size_t>(taken)]) {
    case RunCall::kCompleteThenMalloc:
      complete_leading(j, &req);
      if (!divergence_) malloc_for(*request);
      break;
    case RunCall::kEmptyCache:
      complete_leading(j, nullptr);
      if (!divergence_) allocator_.empty_cache();
      break;
    case RunCall::kCompleteAll:
      complete_leading(j, nullptr);
      break;
    case RunCall::kMallocFirst:
      malloc_for(*request);
      break;
  }
  return Status::ok();
}

void TraceReplayer::complete_leading(std::size_t end, const AllocatorEvent* unless_fits) {
  for (std::size_t i = next_;
       i < end && !divergence_ && next_ == i && expected(i).action == Action::kFreeCompleted; ++i) {
    if (unless_fits != nullptr && cache_fits(*unless_fits, {expected(i).addr})) return;
    complete(expected(i));
  }
}

bool TraceReplayer::cache_fits(const AllocatorEvent& request,
                               const std::vector<std::uint64_t>& completing) const {
  // get_free_block(): the first free block of the request's pool and stream
  // in (size, address) order that is large enough (pending frees in
  // `completing` count as done, merged with their free neighbours); with
  // expandable segments, moved on to the next ones while they can grow
  // less; then the max_split_size rules.
  using State = SegmentInfo::Block::State;
  struct Candidate {
    std::int64_t size;
    std::uint64_t addr;
    bool expandable;
    std::int64_t unmapped_after;  // bytes it could grow into
  };
  const std::int64_t rounded = round_request(request.size, config_);
  const bool small = rounded <= kSmallSize;
  const auto free_now = [&](const SegmentInfo::Block& b) {
    return b.state == State::kFree ||
           (b.state == State::kPendingFree &&
            std::find(completing.begin(), completing.end(), b.addr) != completing.end());
  };
  std::vector<Candidate> free_blocks;
  for (const SegmentInfo& seg : allocator_.segments()) {
    if (seg.small_pool != small || seg.stream != request.stream) continue;
    for (std::size_t i = 0; i < seg.blocks.size();) {
      if (!free_now(seg.blocks[i])) {
        ++i;
        continue;
      }
      Candidate c{0, seg.blocks[i].addr, seg.expandable, 0};
      for (; i < seg.blocks.size() && free_now(seg.blocks[i]); ++i) c.size += seg.blocks[i].size;
      if (i < seg.blocks.size() && seg.blocks[i].state == State::kUnmapped)
        c.unmapped_after = seg.blocks[i].size;
      free_blocks.push_back(c);
    }
  }
  std::sort(free_blocks.begin(), free_blocks.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.size, a.addr) < std::tie(b.size, b.addr);
  });
  auto it = std::find_if(free_blocks.begin(), free_blocks.end(),
                         [&](const Candidate& c) { return c.size >= rounded; });
  if (it == free_blocks.end()) return false;
  if (it->expandable && config_.expandable_segments) {
    const auto grows = [](const Candidate& c) { return c.size + c.unmapped_after; };
    for (auto next = it + 1;
         it->expandable && next != free_blocks.end() && grows(*next) < grows(*it);)
      it = next++;
  }
  const std::int64_t mss = config_.max_split_size;
  if (rounded < mss && it->size >= mss) return false;
  if (rounded >= mss && it->size >= rounded + kLargeBuffer) return false;
  return true;
}

}  // namespace prism::snapshot_internal
