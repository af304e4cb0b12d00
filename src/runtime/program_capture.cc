#include "runtime/program_capture.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "runtime/live_session.h"
#include "runtime/split_color.h"
#include "util/check.h"

namespace prism::runtime {
namespace {

// The virtual time a message from the rank carries, if any. A compute report
// is not among them: it comes when the compute ended, stamped with its start.
std::optional<std::int64_t> time_of(const wire::Message& m) {
  return std::visit(
      [](const auto& v) -> std::optional<std::int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, wire::Op> || std::is_same_v<T, wire::Wait> ||
                      std::is_same_v<T, wire::Memory> || std::is_same_v<T, wire::Marker> ||
                      std::is_same_v<T, wire::Bye>) {
          return v.at;
        } else {
          return std::nullopt;
        }
      },
      m);
}

}  // namespace

// The capture policy of a live session (runtime/live_session.h): one rank,
// every op answered as it is entered, everything recorded.
class ProgramCapture::Impl : public LivePolicy {
 public:
  explicit Impl(ProgramCaptureOptions o)
      : options_(std::move(o)),
        live_(LiveSessionOptions{{options_.rank},
                                 options_.world_size,
                                 "captured rank",
                                 options_.timeout,
                                 options_.secret},
              *this) {}

  Result<wire::Address> listen(const wire::Address& a) { return live_.listen(a); }
  bool connected() const { return live_.connected(options_.rank); }

  Result<RankCapture> run(const std::function<Status()>& tick) {
    PRISM_RETURN_IF_ERROR(live_.run(tick));
    return std::move(capture_);
  }

  std::string not_expected(Rank r) const override {
    return fmt::format("rank {} is not the rank being captured ({})", r, options_.rank);
  }

  void hello(Rank, const wire::Hello& h) override {
    capture_ = RankCapture{h.rank, h.world_size, h.pid, h.program, options_.job, {}};
    capture_.entries.push_back(CaptureEntry{h, kNone});
    send(wire::Welcome{h.rank, h.world_size, 0, options_.job, true});
  }

  Status handle(Rank, const wire::Message& m) override {
    if (const auto* c = std::get_if<wire::CommInit>(&m); c != nullptr && c->members.empty()) {
      // Recorded with its members where the store knows them, so that the
      // graph built from the capture has them.
      wire::CommInit known = *c;
      known.members = members_of(*c);
      return record(known);
    }
    return record(m);
  }

  Status record(const wire::Message& m) {
    capture_.entries.push_back(CaptureEntry{m, kNone});
    PRISM_RETURN_IF_ERROR(dispatch(m));
    if (done_) {
      live_.close(options_.rank);  // the rank reads until this close
      live_.finish();
    }
    return Status::ok();
  }

  Status closed(Rank, const Status& why) override {
    if (done_) return Status::ok();
    return Status::unavailable(fmt::format(
        "captured rank {}: {}; {}", options_.rank,
        why.is_ok() ? "connection closed without a bye" : why.message(), last_op_text()));
  }

  Status check(SteadyClock::time_point now) override {
    if (now - live_.last_heard(options_.rank) > options_.timeout)
      return Status::deadline_exceeded(fmt::format("captured rank {} sent nothing for {}; {}",
                                                   options_.rank, live_.seconds_of_timeout(),
                                                   last_op_text()));
    return Status::ok();
  }

 private:
  void send(const wire::Message& m) {
    capture_.entries.push_back(CaptureEntry{m, kNone});
    live_.send(options_.rank, m);
  }

  Status dispatch(const wire::Message& m) {
    if (const std::optional<std::int64_t> at = time_of(m)) {
      if (*at < last_at_)
        return Status::invalid_argument(
            fmt::format("captured rank {} sent {} at {} ns, before {} ns: its clock went back",
                        options_.rank, wire::to_string(wire::type_of(m)), *at, last_at_));
      last_at_ = *at;
    }
    switch (wire::type_of(m)) {
      case wire::MessageType::kCommInit: {
        const auto& c = std::get<wire::CommInit>(m);
        if (comms_.contains(c.comm))
          return Status::failed_precondition(fmt::format(
              "captured rank {} declared communicator {} twice", options_.rank, c.comm));
        comms_[c.comm] = c.members;  // as handle() resolved them
        return Status::ok();
      }
      case wire::MessageType::kCommSplit:
        return split(std::get<wire::CommSplit>(m));
      case wire::MessageType::kOp: {
        const auto& op = std::get<wire::Op>(m);
        if (!comms_.contains(op.comm))
          return Status::failed_precondition(
              fmt::format("captured rank {} op {}: communicator {} was never declared",
                          options_.rank, op.op_id, op.comm));
        ++ops_;
        last_op_ = fmt::format("{} of {} bytes (op {}), entered at {} ns", wire::to_string(op.code),
                               op.bytes, op.op_id, op.at);
        send(wire::Complete{op.op_id, op.at});  // the peers are all there already
        return Status::ok();
      }
      case wire::MessageType::kBye:
        done_ = true;
        return Status::ok();
      case wire::MessageType::kWait:
      case wire::MessageType::kMemory:
      case wire::MessageType::kMarker:
      case wire::MessageType::kCompute:
        return Status::ok();  // every op is answered already; the rest is recorded
      default:
        return Status::invalid_argument(
            fmt::format("captured rank {} sent {}, which only the coordinator sends", options_.rank,
                        wire::to_string(wire::type_of(m))));
    }
  }

  // A communicator's members when the rank said them, when it has one rank,
  // when its size and position are the world's (what a data-parallel capture
  // allows), or when the store knows its id (options_.comm_ids); else empty:
  // unknown.
  std::vector<std::int32_t> members_of(const wire::CommInit& c) const {
    if (!c.members.empty()) return c.members;
    if (c.nranks == 1 && c.rank_in_comm == 0) return {options_.rank};
    if (c.nranks == options_.world_size && c.rank_in_comm == options_.rank) {
      std::vector<std::int32_t> world(static_cast<std::size_t>(c.nranks));
      std::iota(world.begin(), world.end(), 0);
      return world;
    }
    if (options_.comm_ids == nullptr || c.id_hash == 0) return {};
    return options_.comm_ids->members_of(c.id_hash, c.nranks, c.rank_in_comm, options_.rank);
  }

  // With every other rank virtual, the colors the others pass are unknown:
  // the group is found among those a device mesh or Megatron's layout makes
  // over the parent, by the color new_group passes for it, else among the
  // job's grid groups left, by the color split_group passes
  // (runtime/split_color.h). Each dimension is split once, in mesh order, so
  // the first grid group left with that color is taken.
  Status split(const wire::CommSplit& s) {
    const auto where = [&] {
      return fmt::format("captured rank {} split communicator {} from {}", options_.rank, s.comm,
                         s.parent);
    };
    const auto parent = comms_.find(s.parent);
    if (parent == comms_.end() || comms_.contains(s.comm))
      return Status::failed_precondition(
          fmt::format("{}: {}", where(),
                      parent == comms_.end() ? "the parent was never declared" : "declared twice"));
    const std::vector<std::int32_t>& members = parent->second;
    const auto position = std::find(members.begin(), members.end(), options_.rank);
    if (position == members.end()) {
      return Status::unimplemented(fmt::format(
          "{} with color {}: the parent's members are not known (declared by size and position "
          "only, not the world's)",
          where(), s.color));
    }
    const std::vector<MeshGroup> groups =
        mesh_groups_of(members, static_cast<int>(position - members.begin()));
    for (const MeshGroup& g : groups) {
      if (torch_split_color(g.ranks) == s.color) return answer(s.comm, g.ranks);
    }
    for (const std::vector<std::int32_t>& g : options_.grid_groups) {
      if (!answered_.contains(g) && torch_split_group_color(g, members) == s.color)
        return answer(s.comm, g);
    }
    return Status::unimplemented(fmt::format(
        "{} with color {}: none of the {} groups of a mesh over the parent's {} ranks that hold "
        "it (each stride t and size s with t * s dividing {}) has that color as PyTorch's "
        "new_group computes it, and none of the job's {} grid groups of the rank left has it as "
        "its lowest rank in the parent (split_group's color); the capture of one rank answers "
        "only those",
        where(), s.color, groups.size(), members.size(), members.size(),
        options_.grid_groups.size()));
  }

  // `group` (ascending) answers the split that makes communicator `comm`.
  Status answer(std::uint32_t comm, const std::vector<std::int32_t>& group) {
    const auto in_group = std::find(group.begin(), group.end(), options_.rank);
    PRISM_CHECK(in_group != group.end(), "a split's group without the captured rank");
    send(wire::CommInfo{comm, static_cast<std::int32_t>(in_group - group.begin()), group});
    comms_[comm] = group;
    answered_.insert(group);
    return Status::ok();
  }

  std::string last_op_text() const {
    return ops_ == 0 ? "it had entered no op" : fmt::format("its last op: {}", last_op_);
  }

  ProgramCaptureOptions options_;
  LiveSession live_;
  RankCapture capture_;
  std::map<std::uint32_t, std::vector<std::int32_t>> comms_;  // handle -> members, if known
  std::set<std::vector<std::int32_t>> answered_;              // the groups splits made
  std::int64_t last_at_ = 0;
  std::int64_t ops_ = 0;
  std::string last_op_;
  bool done_ = false;
};

ProgramCapture::ProgramCapture(ProgramCaptureOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
ProgramCapture::~ProgramCapture() = default;

Result<wire::Address> ProgramCapture::listen(const wire::Address& a) {
  return impl_->listen(a);
}
Result<RankCapture> ProgramCapture::run(const std::function<Status()>& tick) {
  return impl_->run(tick);
}
bool ProgramCapture::connected() const {
  return impl_->connected();
}

}  // namespace prism::runtime
