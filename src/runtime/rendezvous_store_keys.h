// Which store keys speak for ranks, and how a virtual rank answers them.
//
// torch.distributed reaches the store through PrefixStores that join with
// '/': TORCHELASTIC_USE_AGENT_STORE's "/worker/attempt_N", init_process_group's
// "default_pg", the process group's name, in torch 2.x the backend's device
// ("cuda", "cpu"), and TCPStore's own leading "/". So a key on the wire reads
// "//worker/attempt_0/default_pg/0//cuda//0" (2.x, the default group's first
// NCCL id) or "//worker/attempt_0/default_pg/0/0" (1.13). classify() splits a
// key at '/', drops empty parts, and recognises (docs/rendezvous.md):
//
// | kind              | key (after the prefixes)                  | published by          |
// |-------------------|-------------------------------------------|-----------------------|
// | kWorkerCounter    | "init/" (exactly; TCPStore waitForWorkers) | every rank (ADD 1)    |
// | kBarrierCounter   | "store_based_barrier_key:<N or group>"    | every rank (ADD 1)    |
// | kNcclId           | default_pg/<group>[/<device>]/<counter>   | group rank 0          |
// | kNcclP2pId        | default_pg/<group>[/<device>]/<a>:<b>     | group rank min(a, b)  |
// | kNcclRootId       | .../UniqueNCCLID:<r>                      | root r (scalable init)|
// | kGlooAddress      | default_pg/<group>[/<device>]/<i>/<r>     | group rank r          |
// |                   | default_pg/<group>[/<device>]/<i>/rank_<r>|                       |
// | kGroupDeclaration | prism/group/<group>                       | a PrismLLM frontend   |
// | kObject           | prism/object/<src>/...                    | rank src (prism_torch)|
//
// Everything here is pure: string in, facts out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace prism::runtime::store_keys {

enum class KeyKind {
  kPlain,
  kWorkerCounter,
  kBarrierCounter,
  kNcclId,
  kNcclP2pId,
  kNcclRootId,
  kGlooAddress,
  kGroupDeclaration,
  kObject,
};

struct KeyInfo {
  KeyKind kind = KeyKind::kPlain;
  // The process group the key belongs to ("0": torch's default group);
  // kGroupDeclaration: the group it declares.
  std::string group;
  // The group rank that publishes the key; kNcclRootId: the root's index.
  std::int32_t rank = -1;
  // kNcclP2pId: the pair's other group rank (the higher of the two).
  std::int32_t peer = -1;
  // kBarrierCounter: what follows "store_based_barrier_key:" (1.13: a group
  // count; 2.x: the group's name).
  std::string barrier_name;
  // kNcclRootId: the key up to "UniqueNCCLID:", shared by the roots of one
  // communicator.
  std::string root_prefix;
  // kObject: the key from "prism/object/" on (slicing/object_keys.h), its
  // sender's global rank in `rank`.
  std::string object_key;
};

KeyInfo classify(std::string_view key);

// "0,2,4" (spaces allowed) into ranks; the error names the bad item.
Result<std::vector<std::int32_t>> parse_members(std::string_view text);

// The ncclUniqueId a virtual rank publishes under `key`: 128 bytes, "prism-id"
// then the FNV-1a 64-bit hash of the key (little-endian) 15 times.
std::vector<std::uint8_t> synthesized_id(std::string_view key);
inline constexpr std::size_t kNcclUniqueIdBytes = 128;

// The group rank of root `root` when ncclCommInitRankScalable spreads
// `n_roots` roots over `n_ranks` ranks (ProcessGroupNCCL's getRootIndex,
// inverted: the first n_ranks % n_roots roots lead one rank more).
std::int32_t scalable_root_rank(std::int32_t root, std::int32_t n_roots, std::int32_t n_ranks);

}  // namespace prism::runtime::store_keys
