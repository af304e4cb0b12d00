#include "runtime/program_capture.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "runtime/split_color.h"
#include "wire/server.h"

namespace prism::runtime {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTick{10};

std::string seconds(std::chrono::milliseconds d) {
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000);
}

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

class ProgramCapture::Impl : public wire::ServerHandler {
 public:
  explicit Impl(ProgramCaptureOptions o) : options_(std::move(o)), server_(*this, {}) {}

  Result<wire::Address> listen(const wire::Address& a) { return server_.listen(a); }
  bool connected() const { return peer_.has_value(); }

  Result<RankCapture> run(const std::function<Status()>& tick) {
    const auto started = SteadyClock::now();
    last_heard_ = started;
    while (failed_.is_ok() && !done_) {
      server_.run_for(kTick);
      if (!failed_.is_ok() || done_) break;
      Status st = tick();
      if (st.is_ok()) st = check_timeout(started);
      if (!st.is_ok()) fail(std::move(st), wire::ErrorCode::kAborted);
    }
    for (int i = 0; i < 20 && server_.num_peers() > 0; ++i) server_.run_for(kTick);
    if (!failed_.is_ok()) return failed_;
    return std::move(capture_);
  }

  void on_message(wire::PeerId peer, wire::Message m) override {
    if (!failed_.is_ok()) return;
    if (const auto* h = std::get_if<wire::Hello>(&m)) return hello(peer, *h);
    if (!peer_ || *peer_ != peer) {
      server_.send(peer,
                   wire::Error{wire::ErrorCode::kRejected, "the first message must be hello"});
      server_.close(peer);
      return;
    }
    last_heard_ = SteadyClock::now();
    capture_.entries.push_back(CaptureEntry{m, kNone});
    Status st = handle(m);
    if (!st.is_ok()) return fail(std::move(st), wire::ErrorCode::kRejected);
    if (done_) server_.close(peer);  // the rank reads until this close
  }

  void on_close(wire::PeerId peer, const Status& why) override {
    if (!failed_.is_ok() || done_) return;
    if (!peer_ || *peer_ != peer) {
      if (!why.is_ok())
        fail(Status::invalid_argument(
                 fmt::format("a peer that never said hello: {}", why.message())),
             wire::ErrorCode::kAborted);
      return;
    }
    peer_.reset();
    fail(Status::invalid_argument(fmt::format(
             "captured rank {}: {}; {}", options_.rank,
             why.is_ok() ? "connection closed without a bye" : why.message(), last_op_text())),
         wire::ErrorCode::kAborted);
  }

 private:
  void hello(wire::PeerId peer, const wire::Hello& h) {
    std::string why;
    if (h.world_size != options_.world_size) {
      why = fmt::format("world size {}, the job has {}", h.world_size, options_.world_size);
    } else if (h.rank != options_.rank) {
      why = fmt::format("rank {} is not the rank being captured ({})", h.rank, options_.rank);
    } else if (peer_) {
      why = fmt::format("rank {} is connected already", h.rank);
    }
    if (!why.empty()) {
      server_.send(peer, wire::Error{wire::ErrorCode::kRejected, why});
      server_.close(peer);
      return;
    }
    peer_ = peer;
    last_heard_ = SteadyClock::now();
    capture_ = RankCapture{h.rank, h.world_size, h.pid, h.program, options_.job, {}};
    capture_.entries.push_back(CaptureEntry{h, kNone});
    send(wire::Welcome{h.rank, h.world_size, 0, options_.job});
  }

  void send(const wire::Message& m) {
    capture_.entries.push_back(CaptureEntry{m, kNone});
    server_.send(*peer_, m);
  }

  Status handle(const wire::Message& m) {
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
          return Status::invalid_argument(fmt::format(
              "captured rank {} declared communicator {} twice", options_.rank, c.comm));
        comms_[c.comm] = members_of(c);
        return Status::ok();
      }
      case wire::MessageType::kCommSplit:
        return split(std::get<wire::CommSplit>(m));
      case wire::MessageType::kOp: {
        const auto& op = std::get<wire::Op>(m);
        if (!comms_.contains(op.comm))
          return Status::invalid_argument(
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

  // A communicator's members when the rank said them, or when its size and
  // position are the world's (what a data-parallel capture allows); else
  // empty: unknown.
  std::vector<std::int32_t> members_of(const wire::CommInit& c) const {
    if (!c.members.empty()) return c.members;
    if (c.nranks != options_.world_size || c.rank_in_comm != options_.rank) return {};
    std::vector<std::int32_t> world(static_cast<std::size_t>(c.nranks));
    std::iota(world.begin(), world.end(), 0);
    return world;
  }

  // With every other rank virtual, only a split that keeps all of the
  // parent can be answered: PyTorch's new_group over every rank passes the
  // color of the parent's members (runtime/split_color.h).
  Status split(const wire::CommSplit& s) {
    const auto parent = comms_.find(s.parent);
    if (parent == comms_.end() || comms_.contains(s.comm))
      return Status::invalid_argument(fmt::format(
          "captured rank {} split communicator {} from {}: {}", options_.rank, s.comm, s.parent,
          parent == comms_.end() ? "the parent was never declared" : "declared twice"));
    const std::vector<std::int32_t>& members = parent->second;
    if (members.empty() || torch_split_color(members) != s.color) {
      return Status::invalid_argument(fmt::format(
          "captured rank {} split communicator {} from {} with color {}: the capture of one rank "
          "can answer only a split that keeps every rank of the parent (PyTorch's new_group over "
          "all of them); a program with subgroups needs a capture of each role",
          options_.rank, s.comm, s.parent, s.color));
    }
    const auto position = std::find(members.begin(), members.end(), options_.rank);
    comms_[s.comm] = members;
    send(wire::CommInfo{s.comm, static_cast<std::int32_t>(position - members.begin()), members});
    return Status::ok();
  }

  std::string last_op_text() const {
    return ops_ == 0 ? "it had entered no op" : fmt::format("its last op: {}", last_op_);
  }

  Status check_timeout(SteadyClock::time_point started) const {
    const auto now = SteadyClock::now();
    if (!peer_ && now - started > options_.timeout)
      return Status::invalid_argument(fmt::format("captured rank {} did not connect within {}",
                                                  options_.rank, seconds(options_.timeout)));
    if (peer_ && now - last_heard_ > options_.timeout)
      return Status::invalid_argument(fmt::format("captured rank {} sent nothing for {}; {}",
                                                  options_.rank, seconds(options_.timeout),
                                                  last_op_text()));
    return Status::ok();
  }

  void fail(Status why, wire::ErrorCode code) {
    if (!failed_.is_ok()) return;
    failed_ = std::move(why);
    if (peer_) {
      server_.send(*peer_, wire::Error{code, failed_.message()});
      server_.close(*peer_);
    }
    server_.stop();
  }

  ProgramCaptureOptions options_;
  wire::Server server_;
  std::optional<wire::PeerId> peer_;
  RankCapture capture_;
  std::map<std::uint32_t, std::vector<std::int32_t>> comms_;  // handle -> members, if known
  std::int64_t last_at_ = 0;
  std::int64_t ops_ = 0;
  std::string last_op_;
  SteadyClock::time_point last_heard_;
  Status failed_ = Status::ok();
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
