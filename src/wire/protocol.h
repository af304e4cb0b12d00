// The wire protocol between live ranks and the coordinator (docs/protocol.md).
//
// Every message is one frame: a 16-byte header and a payload whose layout the
// header's type fixes. All integers are little-endian; strings and lists are
// a u32 count followed by the items.
//
//   u32 magic    0x4d535250, the bytes "PRSM"
//   u16 version  kProtocolVersion
//   u16 type     MessageType
//   u32 seq      frames sent so far on this connection in this direction
//   u32 length   payload bytes, at most kMaxPayload
//
// `at` fields are nanoseconds of emulated (virtual) time. The client keeps
// each live rank's virtual clock and maps it to its own real clock, so the
// coordinator never compares real clocks and live ranks on other hosts need
// no clock synchronization.
//
// FrameDecoder accepts bytes as they arrive and returns whole messages; it
// rejects, with the frame's number and the field, a bad magic, another
// version, an unknown type, a frame out of sequence, a payload longer or
// shorter than its type's fields, and values out of range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "util/status.h"
#include "util/vocab.h"

namespace prism::wire {

inline constexpr std::uint32_t kMagic = 0x4d535250;  // "PRSM" on the wire
inline constexpr std::uint16_t kProtocolVersion = 4;
inline constexpr std::size_t kHeaderSize = 16;
inline constexpr std::uint32_t kMaxPayload = 1 << 20;
inline constexpr std::uint32_t kMaxString = 4096;
inline constexpr std::uint32_t kMaxMembers = 1 << 17;  // ranks of one communicator

enum class MessageType : std::uint16_t {
  // live rank -> coordinator
  kHello = 1,
  kCommInit = 2,
  kOp = 3,
  kMemory = 4,
  kMarker = 5,
  kCompute = 6,
  kBye = 7,
  kWait = 8,
  kCommSplit = 9,
  // coordinator -> live rank
  kWelcome = 64,
  kComplete = 65,
  kError = 66,
  kHorizon = 67,
  kCommInfo = 68,
};

// The first message of a live rank: who it is.
struct Hello {
  std::int32_t rank = 0;
  std::int32_t world_size = 0;
  std::int32_t local_rank = 0;
  std::int64_t pid = 0;
  std::string program;  // for messages: argv[0] or a label
  // The run's secret ($PRISM_SECRET, which `prism emulate` gives the ranks it
  // starts): a hello without it is refused, so no other process on the host
  // (or, with --listen tcp, the network) can take a rank's place.
  std::string secret;
};

// A communicator the rank created. `comm` is the rank's own handle for it,
// used by later ops. `members` lists the global ranks in communicator order
// when the rank knows them (empty when not, as with ncclCommInitRank); the
// coordinator then matches it among the job's communicators by size, the
// rank's position and `id_hash` (e.g. a hash of the ncclUniqueId).
struct CommInit {
  std::uint32_t comm = 0;
  std::int32_t nranks = 0;
  std::int32_t rank_in_comm = 0;
  std::uint64_t id_hash = 0;
  std::vector<std::int32_t> members;
};

// ncclCommSplit: the rank makes communicator `comm` from its communicator
// `parent`, with NCCL's color and key (color is never NCCL_SPLIT_NOCOLOR: a
// rank that passes it makes no communicator and says nothing). The
// coordinator answers with a CommInfo for `comm`, which the rank waits for;
// `comm` then stands as if declared with those members.
struct CommSplit {
  std::uint32_t parent = 0;
  std::uint32_t comm = 0;
  std::int32_t color = 0;
  std::int32_t key = 0;
};

// What an op does on the wire: a collective, or one side of a point-to-point
// transfer.
enum class OpCode : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kBarrier,
  kSend,
  kRecv,
};
inline constexpr int kNumOpCodes = 9;

std::string_view to_string(OpCode c);
// The collective an OpCode names; nullopt for kSend and kRecv.
std::optional<CollectiveKind> collective_of(OpCode c);
OpCode op_code(CollectiveKind k);

// A communication op the rank enters at virtual time `at`. The coordinator
// answers with a Complete carrying the same op_id; ops of several streams may
// be outstanding at once and complete in any order.
struct Op {
  std::uint32_t op_id = 0;  // the rank's own numbering, increasing
  std::uint32_t comm = 0;   // a CommInit handle
  std::uint16_t stream = 0;
  OpCode code = OpCode::kAllReduce;
  DType dtype = DType::kBFloat16;
  std::int64_t bytes = 0;  // as in the graph format: a collective's per-rank buffer
  std::int32_t peer = 0;   // send/recv: peer's rank in comm; broadcast/reduce: root
  std::int32_t tag = 0;
  std::uint32_t group = 0;  // ncclGroupStart/End: nonzero, shared by the group's ops
  std::int64_t at = 0;
};

enum class MemoryAction : std::uint8_t { kAlloc, kFree };

struct Memory {
  MemoryAction action = MemoryAction::kAlloc;
  std::uint64_t id = 0;  // the allocation's identity (an address), shared by its free
  std::int64_t bytes = 0;
  std::uint16_t stream = 0;
  std::int64_t at = 0;
};

enum class MarkerCode : std::uint8_t { kIterationBegin, kIterationEnd, kMicrobatch, kPhase };

struct Marker {
  MarkerCode code = MarkerCode::kIterationBegin;
  std::int32_t value = 0;  // iteration or micro-batch number
  std::int64_t at = 0;
};

// Compute the rank measured (a kernel's time between CUDA events, or a
// host-side interval): what capture records.
struct Compute {
  std::uint16_t stream = 0;
  std::int64_t at = 0;
  std::int64_t duration = 0;
  std::string name;
};

// The rank's program ends.
struct Bye {
  std::int32_t exit_code = 0;
  std::int64_t at = 0;
};

// The rank stops sending from virtual time `at` until op `op_id` (kAnyOp:
// whichever of its ops the coordinator answers first) completes, or until
// virtual time `until`, whichever comes first. This is what lets the
// coordinator run ahead of a waiting rank (docs/protocol.md, "Waiting").
// `answers_seen` counts the Complete messages the rank had received when it
// sent this: later ones may wake it. A wait that ends at `until` is answered
// with a Horizon carrying its `wait_id`.
inline constexpr std::uint32_t kAnyOp = 0xffffffff;
inline constexpr std::int64_t kNoLimit = INT64_MAX;
struct Wait {
  std::uint32_t wait_id = 0;  // the rank's own numbering of its waits
  std::uint32_t op_id = kAnyOp;
  std::uint32_t answers_seen = 0;
  std::int64_t at = 0;
  std::int64_t until = kNoLimit;
};

// The coordinator accepts the rank; its virtual clock starts at `start_at`.
// `capture`: the coordinator records the rank's program rather than
// emulating a job (every op completes when entered), and the rank puts each
// of its waits for an op on the wire, even for an answer it already has.
struct Welcome {
  std::int32_t rank = 0;
  std::int32_t world_size = 0;
  std::int64_t start_at = 0;
  std::string job;
  bool capture = false;
};

// Op `op_id` completes at virtual time `at`. `nccl_bytes`: the device
// memory NCCL would have allocated on this rank for the op at full scale
// (its communicator's init on first use, buffers of an algorithm or peer
// connected first by it; replay/nccl_memory.h), which the NCCL drop-in then
// allocates on the real GPU. Zero for most ops.
struct Complete {
  std::uint32_t op_id = 0;
  std::int64_t at = 0;
  std::int64_t nccl_bytes = 0;
};

enum class ErrorCode : std::uint32_t {
  kProtocol = 1,  // a malformed, unknown or out-of-order message
  kRejected = 2,  // a well-formed message the job cannot accept (wrong rank, unknown comm)
  kAborted = 3,   // the emulation ended (another rank failed, a timeout)
  kMismatch = 4,  // the rank did what the graph does not (another op, other bytes)
};

struct Error {
  ErrorCode code = ErrorCode::kProtocol;
  std::string message;
};

// Wait `wait_id` reached its `until` (= `at`) with none of the ops it waits
// for complete: the rank goes on at `at`. `quiet_until`, when after `at`:
// while the rank sends nothing, none of its ops can complete before that
// virtual time (the coordinator's next event, and the other live ranks'
// bounds), so a progress thread need not poll before it; kNoLimit: not
// until the rank sends something. At or before `at`: not said.
struct Horizon {
  std::uint32_t wait_id = 0;
  std::int64_t at = 0;
  std::int64_t quiet_until = 0;
};

// The answer to a CommSplit: the new communicator's members, global ranks in
// communicator order, and the rank's position among them.
struct CommInfo {
  std::uint32_t comm = 0;
  std::int32_t rank_in_comm = 0;
  std::vector<std::int32_t> members;
};

using Message = std::variant<Hello, CommInit, Op, Memory, Marker, Compute, Bye, Wait, Welcome,
                             Complete, Error, Horizon, CommSplit, CommInfo>;

MessageType type_of(const Message& m);
std::string_view to_string(MessageType t);

// One frame: header and payload. Fails (a bug, not bad input) on strings or
// lists beyond the limits above.
std::string encode(const Message& m, std::uint32_t seq);

// Turns a byte stream into messages, checking each frame. After an error the
// decoder stays failed: the connection is to be closed.
class FrameDecoder {
 public:
  // Adds received bytes.
  void feed(std::string_view bytes);
  // The next whole message, nullopt when more bytes are needed, or the first
  // error ("frame 3 (op): bytes -5 is negative").
  Result<std::optional<Message>> next();
  // Frames decoded so far (the next frame's expected seq).
  std::uint32_t frames() const { return seq_; }
  // Bytes received and not yet decoded: a connection closed with some left
  // ended in the middle of a frame.
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint32_t seq_ = 0;
  Status failed_;
};

}  // namespace prism::wire
