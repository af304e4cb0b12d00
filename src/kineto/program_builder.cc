#include "kineto/program_builder.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "graph/layout.h"
#include "graph/role_builder.h"
#include "util/units.h"

namespace prism::kineto {
namespace {

// Adds `op` to the summary's counts.
void count(const Op& op, KinetoSummary* summary) {
  switch (op.kind) {
    case OpKind::kCompute:
      ++summary->compute_ops;
      break;
    case OpKind::kCollective:
      ++summary->collectives;
      break;
    case OpKind::kSend:
      ++summary->sends;
      break;
    case OpKind::kRecv:
      ++summary->recvs;
      break;
    case OpKind::kAlloc:
      ++summary->allocs;
      break;
    case OpKind::kFree:
      ++summary->frees;
      break;
    case OpKind::kEventWait:
      ++summary->stream_waits;
      break;
    case OpKind::kMarker:
      if (op.marker == MarkerKind::kIteration) ++summary->iterations;
      break;
    case OpKind::kEventRecord:
      break;
  }
}

}  // namespace

ProgramBuilder::ProgramBuilder(std::string source, Rank rank) {
  program_.source = std::move(source);
  program_.rank = rank;
}

int ProgramBuilder::add_stream(std::string name) {
  streams_.push_back(std::move(name));
  return static_cast<int>(streams_.size()) - 1;
}

int ProgramBuilder::add(Pending p) {
  pending_.push_back(std::move(p));
  return static_cast<int>(pending_.size()) - 1;
}

Result<int> ProgramBuilder::comm(const ProgramComm& c, const std::string& at) {
  for (std::size_t i = 0; i < program_.comms.size(); ++i) {
    const ProgramComm& known = program_.comms[i];
    if (known.key != c.key) continue;
    if (known.members != c.members) {
      return Status::invalid_argument(fmt::format(
          "{}: process group '{}' has ranks {} here but {} in an earlier call; give the groups "
          "distinct descriptions (group_desc)",
          at, c.key, fmt::join(c.members, ","), fmt::join(known.members, ",")));
    }
    return static_cast<int>(i);
  }
  program_.comms.push_back(c);
  return static_cast<int>(program_.comms.size()) - 1;
}

int ProgramBuilder::peer(Rank r) {
  const auto it = std::find(program_.peers.begin(), program_.peers.end(), r);
  if (it != program_.peers.end()) return static_cast<int>(it - program_.peers.begin());
  program_.peers.push_back(r);
  return static_cast<int>(program_.peers.size()) - 1;
}

Status ProgramBuilder::set_comm(const CommCall& call, const std::string& at, Op* op) {
  op->kind = call.kind;
  op->collective = call.collective;
  op->dtype = call.dtype;
  op->bytes = call.bytes;
  if (call.kind == OpKind::kCollective) {
    PRISM_ASSIGN_OR_RETURN(op->ref, comm(call.comm, at));
    op->arg = call.root;
  } else {
    op->ref = peer(call.peer);
  }
  return Status::ok();
}

RankProgram ProgramBuilder::finish(KinetoSummary* summary) && {
  std::vector<std::size_t> order(pending_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto key = [this](std::size_t i) {
    const Pending& p = pending_[i];
    return std::tie(p.key_ns, p.phase, p.corr, p.seq, p.event);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) < key(b); });

  RoleBuilder role("kineto", std::move(streams_));
  role.reserve(pending_.size());
  std::vector<std::int32_t> emitted(pending_.size(), kNone);  // pending -> op index
  std::vector<std::int32_t> event_name(static_cast<std::size_t>(num_events_), kNone);
  for (std::size_t i : order) {
    const Pending& p = pending_[i];
    Op op = p.op;
    if (op.kind == OpKind::kEventRecord || op.kind == OpKind::kEventWait) {
      std::int32_t& e = event_name[static_cast<std::size_t>(op.ref)];
      if (e == kNone)  // named in order of first use: rank-independent
        e = role.event(fmt::format("event{}", role.role().events.size()));
      op.ref = e;
    }
    if (op.kind == OpKind::kFree) {
      op.ref = emitted[static_cast<std::size_t>(op.ref)];
      PRISM_CHECK(op.ref != kNone, "a free sorted before its alloc");
    }
    emitted[i] = role.add(op, p.name);
    count(op, summary);
  }
  program_.role = std::move(role).build();
  return std::move(program_);
}

std::vector<Step> profiler_steps(const ParsedTrace& t) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  std::vector<Step> steps;
  for (const TraceEvent& e : t.events) {
    if (e.cls != EventClass::kHostOp && e.cls != EventClass::kAnnotation) continue;
    if (!e.name.starts_with(kPrefix)) continue;
    const std::string_view digits = e.name.substr(kPrefix.size());
    int n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) continue;
    steps.push_back(Step{&e, n});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& a, const Step& b) { return a.event->ts_ns < b.event->ts_ns; });
  return steps;
}

void add_markers(const std::vector<Step>& steps, int stream, ProgramBuilder* b) {
  for (const Step& s : steps) {
    Pending p;
    p.key_ns = s.event->ts_ns;
    p.phase = 0;
    p.event = s.event->index;
    p.op.kind = OpKind::kMarker;
    p.op.marker = MarkerKind::kIteration;
    p.op.arg = s.index;
    p.op.stream = static_cast<std::uint16_t>(stream);
    b->add(p);
  }
  if (steps.empty()) return;
  std::int64_t end = 0;
  for (const Step& s : steps) end = std::max(end, s.event->end_ns());
  Pending p;
  p.key_ns = end;
  p.phase = 2;
  p.event = steps.back().event->index;
  p.op.kind = OpKind::kMarker;
  p.op.marker = MarkerKind::kIterationEnd;
  p.op.stream = static_cast<std::uint16_t>(stream);
  b->add(p);
}

Status add_memory(const ParsedTrace& t, std::int64_t device, int stream, ProgramBuilder* b,
                  KinetoSummary* summary) {
  constexpr std::int64_t kCudaDeviceType = 1;  // c10::DeviceType::CUDA
  std::vector<const TraceEvent*> mem;
  for (const TraceEvent& e : t.events)
    if (e.cls == EventClass::kMemory) mem.push_back(&e);
  std::stable_sort(mem.begin(), mem.end(),
                   [](const TraceEvent* a, const TraceEvent* b) { return a->ts_ns < b->ts_ns; });
  std::unordered_map<std::int64_t, int> live;  // address -> pending alloc
  for (const TraceEvent* e : mem) {
    if (arg_int(find_arg(e->args, "Device Type")) != kCudaDeviceType) continue;
    const std::optional<std::int64_t> dev = arg_int(find_arg(e->args, "Device Id"));
    if (device >= 0 && dev != device) continue;
    const std::optional<std::int64_t> bytes = arg_int(find_arg(e->args, "Bytes"));
    const std::optional<std::int64_t> addr = arg_int(find_arg(e->args, "Addr"));
    if (!bytes || !addr) {
      return Status::invalid_argument(fmt::format(
          "{}: a memory event needs integer args \"Bytes\" and \"Addr\"", where(t.source, *e)));
    }
    if (*bytes > kMaxBytes.count || *bytes < -kMaxBytes.count) {
      return Status::invalid_argument(fmt::format(
          "{}: \"Bytes\" {} exceeds the limit of 2^50 bytes", where(t.source, *e), *bytes));
    }
    if (*bytes == 0) continue;
    Pending p;
    p.key_ns = e->ts_ns;
    p.event = e->index;
    p.op.stream = static_cast<std::uint16_t>(stream);
    if (*bytes > 0) {
      p.op.kind = OpKind::kAlloc;
      p.op.bytes = Bytes{*bytes};
      live[*addr] = b->add(p);
      continue;
    }
    const auto it = live.find(*addr);
    if (it == live.end()) {
      ++summary->frees_without_alloc;
      continue;
    }
    p.op.kind = OpKind::kFree;
    p.op.ref = it->second;
    live.erase(it);
    b->add(p);
  }
  return Status::ok();
}

}  // namespace prism::kineto
