// A two-rank graph that uses every op kind, for the export and round-trip
// tests.
#pragma once

#include "../replay/test_graphs.h"

namespace prism::chakra_test {

// Both ranks: an iteration marker, an activation alloc, a 1.5 us forward, an
// event handing over to the comm stream, an fp32 all-reduce over the world, a
// free recorded on the comm stream, a GEMM with a kernel cost, and a grouped
// send/recv exchange with the other rank, carried by userbuffers.
inline ExecutionGraph small_graph() {
  RoleBuilder b("r", {"compute", "comm"});
  b.marker(0, MarkerKind::kIteration, 0);                                                 // 0
  const int alloc = b.alloc(0, Bytes{1024});                                              // 1
  b.compute(0, SimTime{1500}, "fwd");                                                     // 2
  b.record(0, "e");                                                                       // 3
  b.wait(1, "e");                                                                         // 4
  b.collective(1, 0, CollectiveKind::kAllReduce, Bytes{4096}, DType::kFloat32);           // 5
  b.free(0, alloc, {1});                                                                  // 6
  b.compute_cost(0, KernelCost{KernelClass::kGemm, 1e12, Bytes{1'000'000'000}}, "gemm");  // 7
  b.set_group(b.send(1, 1, Bytes{256}, 3), 1);                                            // 8
  b.set_group(b.recv(1, 1, Bytes{256}, 3), 1);                                            // 9
  b.set_transport(8, Transport::kUserbuffers);
  b.set_transport(9, Transport::kUserbuffers);
  b.add_deps({7});
  b.marker(0, MarkerKind::kIterationEnd, 1);  // 10
  ExecutionGraph g = testing::make_graph(
      {{"dp", 2}}, 8,
      {testing::group_slot("world", {0}), testing::peer_slot("other", 0, 1, /*wrap=*/true)},
      {std::move(b).build()}, {0, 0});
  g.name = "small";
  return g;
}

}  // namespace prism::chakra_test
