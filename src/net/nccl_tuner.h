// NcclTuner: what NCCL 2.2x would pick for a collective on a communicator of
// a given geometry, and how long it takes alone. It follows NCCL's own cost
// model (src/graph/tuning.cc: ncclTopoTuneModel fills per-(collective,
// algorithm, protocol) bandwidth and latency tables; the algorithm time is
// latency + bytes / bandwidth with tree correction factors and the ring
// plateau), over channel counts and per-channel bandwidths that a model of
// NCCL's topology search (src/graph/search.cc) derives from the ClusterSpec.
// Every constant and its source is in docs/collectives.md.
//
// Times are computed in double microseconds as NCCL does, and handed out as
// integer nanoseconds (rounded up), so results repeat exactly.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "net/cluster_spec.h"
#include "util/status.h"
#include "util/units.h"
#include "util/vocab.h"

namespace prism {

// NCCL's algorithm and protocol indices (src/include/device.h order).
// kP2p is not a tuner algorithm: it labels all-to-all and send/recv, which
// NCCL runs as point-to-point operations.
enum class NcclAlgo : std::uint8_t {
  kTree,
  kRing,
  kCollNetDirect,
  kCollNetChain,
  kNvls,
  kNvlsTree,
  kPat,
  kP2p,
};
enum class NcclProto : std::uint8_t { kLL, kLL128, kSimple };
inline constexpr int kNumAlgos = 7;
inline constexpr int kNumProtos = 3;
// NCCL's collective functions that the tuner models (AllToAll and Send/Recv
// are point-to-point in NCCL and have no tuner entry).
enum class NcclFunc : std::uint8_t { kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce };
inline constexpr int kNumFuncs = 5;

std::string_view to_string(NcclAlgo a);
// nccl-tests' bus bandwidth factor for `k` over `n` ranks: 2(n-1)/n for
// all-reduce (and barrier), (n-1)/n for all-gather, reduce-scatter and
// all-to-all, 1 for broadcast and reduce. Also the bytes each rank moves per
// byte of the collective's size.
double nccl_bus_factor(CollectiveKind k, int n);
std::string_view to_string(NcclProto p);

// Ranks of a communicator and how they sit on nodes.
struct CommGeometry {
  int num_ranks = 1;
  int num_nodes = 1;
  int max_ranks_per_node = 1;
  friend bool operator==(const CommGeometry&, const CommGeometry&) = default;
};

// NCCL_ALGO / NCCL_PROTO: which algorithms and protocols each collective may
// use. Syntax as NCCL's environment variables: "Ring,Tree", "^LL128" (all but),
// and per collective "allreduce:tree,ring;allgather:ring" (NCCL 2.24+).
// Names are case-insensitive.
class NcclSelection {
 public:
  NcclSelection();
  static Result<NcclSelection> parse(std::string_view algo, std::string_view proto);
  bool allowed(NcclFunc f, NcclAlgo a, NcclProto p) const {
    return algo_[static_cast<int>(f)][static_cast<int>(a)] &&
           proto_[static_cast<int>(f)][static_cast<int>(p)];
  }

 private:
  std::array<std::array<bool, kNumAlgos>, kNumFuncs> algo_;
  std::array<std::array<bool, kNumProtos>, kNumFuncs> proto_;
};

// The cost of one collective or point-to-point transfer, alone on the
// cluster. time = latency + bandwidth_time.
struct CollectiveCost {
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  int channels = 0;
  SimTime latency;         // NCCL's latency term (base + hardware + steps)
  SimTime bandwidth_time;  // bytes / NCCL's algorithm bandwidth
  SimTime time() const { return latency + bandwidth_time; }
};

class NcclTuner {
 public:
  // `cluster` must be valid (validate_cluster).
  explicit NcclTuner(const ClusterSpec& cluster, NcclSelection selection = {});

  // Collective `k` of nccl-tests size `bytes` over a communicator of
  // `geometry`. AllToAll is timed as NCCL runs it: grouped send/recv to every
  // peer. Barrier is an all-reduce of one float, as torch.distributed does it.
  // Returns nullopt when the selection leaves no algorithm for it.
  std::optional<CollectiveCost> collective(CollectiveKind k, Bytes bytes,
                                           const CommGeometry& geometry) const;
  // A send/recv of `bytes` between two ranks on the same node or on two nodes.
  CollectiveCost point_to_point(Bytes bytes, bool same_node) const;

  const ClusterSpec& cluster() const { return cluster_; }

  // The tables ncclTopoTuneModel fills for one geometry (exposed for tests
  // and docs): bus bandwidth converted to algorithm bandwidth (GB/s) and
  // latency (us); 0 bandwidth = disabled.
  struct Tables {
    float bw[kNumFuncs][kNumAlgos][kNumProtos] = {};
    float lat[kNumFuncs][kNumAlgos][kNumProtos] = {};
    int channels[kNumAlgos] = {};
    int comm_channels = 0;  // the communicator's channels after NCCL duplicates them
  };
  const Tables& tables(const CommGeometry& g) const;

 private:
  struct Graph {  // what NCCL's topology search would find for one algorithm
    int channels = 0;
    double bw_intra = 0;  // GB/s per channel
    double bw_inter = 0;
  };
  Tables build_tables(const CommGeometry& g) const;
  Graph ring_graph(const CommGeometry& g) const;
  Graph nvls_graph(const CommGeometry& g) const;
  std::optional<CollectiveCost> best(NcclFunc f, Bytes bytes, const CommGeometry& g) const;
  CollectiveCost all_to_all(Bytes bytes, const CommGeometry& g) const;

  ClusterSpec cluster_;
  NcclSelection selection_;
  mutable std::unordered_map<std::uint64_t, Tables> cache_;
};

}  // namespace prism
