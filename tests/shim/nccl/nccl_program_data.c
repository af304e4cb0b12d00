/* "data": what collectives leave in host buffers on the host path, against
 * the fake coordinator of nccl_shim_test.cc (RANK=1 of WORLD_SIZE=4): this
 * rank's own bytes, as if every peer held them (src/shim/nccl/mirror.h). */
#include "nccl_program.h"

static void expect_ints(const int* got, const int* want, int n, const char* what) {
  for (int i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      fprintf(stderr, "%s: element %d is %d, expected %d\n", what, i, got[i], want[i]);
      exit(1);
    }
  }
}

int run_data(void) {
  ncclUniqueId id;
  ncclComm_t world = NULL;
  cudaStream_t s = (cudaStream_t)(uintptr_t)0x1000;
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&world, 4, id, 1));

  int send[8] = {1, 2, 3, 4, 5, 6, 7, 8}, recv[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  OK(ncclAllGather(send, recv, 2, ncclInt32, world, s));
  const int gathered[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  expect_ints(recv, gathered, 8, "all-gather out of place");

  int inplace[8] = {0, 0, 7, 8, 0, 0, 0, 0}; /* rank 1's slot holds its input */
  OK(ncclAllGather(inplace + 2, inplace, 2, ncclInt32, world, s));
  const int inplace_want[8] = {7, 8, 7, 8, 7, 8, 7, 8};
  expect_ints(inplace, inplace_want, 8, "all-gather in place");

  int one = 3, out = 0;
  OK(ncclAllReduce(&one, &out, 1, ncclInt32, ncclSum, world, s));
  EXPECT(out == 3); /* no arithmetic: the input, as AVG of equal inputs */
  OK(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, world, s));
  EXPECT(one == 3);

  int chunk[2] = {0, 0};
  OK(ncclReduceScatter(send, chunk, 2, ncclInt32, ncclSum, world, s));
  const int mine[2] = {3, 4}; /* rank 1's chunk of the input */
  expect_ints(chunk, mine, 2, "reduce-scatter");

  int a2a[8] = {0};
  OK(ncclAlltoAll(send, a2a, 2, ncclInt32, world, s));
  expect_ints(a2a, send, 8, "all-to-all");

  int b = 9, b_out = -1;
  OK(ncclBroadcast(&b, &b_out, 1, ncclInt32, 0, world, s)); /* the root's data is unknown */
  EXPECT(b_out == -1);
  OK(ncclBroadcast(&b, &b_out, 1, ncclInt32, 1, world, s)); /* the root's own */
  EXPECT(b_out == 9);

  int r = -1;
  OK(ncclSend(&b, 1, ncclInt32, 2, world, s));
  OK(ncclRecv(&r, 1, ncclInt32, 2, world, s));
  EXPECT(r == -1); /* what a virtual peer sends is not known */

  int grouped[8] = {0};
  OK(ncclGroupStart());
  OK(ncclAllGather(send + 4, grouped, 2, ncclInt32, world, s));
  EXPECT(grouped[0] == 0); /* inside a group nothing has run yet */
  OK(ncclGroupEnd());
  const int grouped_want[8] = {5, 6, 5, 6, 5, 6, 5, 6};
  expect_ints(grouped, grouped_want, 8, "all-gather in a group");

  OK(ncclCommDestroy(world));
  printf("data ok\n");
  return 0;
}

/* Not NCCL's: NCCL's memory at full scale (src/shim/nccl/api_prism.cc). */
ncclResult_t prismNcclFootprint(int64_t* planned, int64_t* allocated);

/* "footprint": the fake coordinator sends NCCL bytes with the completions
 * of ops 0 (3 MiB) and 2 (1 MiB) on communicator 0 and of op 3 on
 * communicator 1 (5 MiB); the drop-in keeps them per communicator until it
 * is destroyed. On the host path (no CUDA) nothing is allocated. */
int run_footprint(void) {
  ncclUniqueId id, id2;
  ncclComm_t world = NULL, other = NULL;
  static float x[16];
  int64_t planned = -1, allocated = -1;
  OK(prismNcclFootprint(&planned, &allocated));
  EXPECT(planned == 0 && allocated == 0);
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&world, 4, id, 1));
  OK(ncclGetUniqueId(&id2));
  OK(ncclCommInitRank(&other, 4, id2, 1));
  OK(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, world, NULL)); /* op 0 */
  OK(prismNcclFootprint(&planned, &allocated));
  EXPECT(planned == 3 << 20 && allocated == 0);
  OK(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, world, NULL)); /* op 1: connected already */
  OK(ncclGroupStart());
  OK(ncclAllGather(x, x, 4, ncclFloat32, world, NULL)); /* op 2 */
  OK(ncclAllGather(x, x, 4, ncclFloat32, other, NULL)); /* op 3 */
  OK(ncclGroupEnd());
  OK(prismNcclFootprint(&planned, NULL));
  EXPECT(planned == (9 << 20));
  OK(ncclCommDestroy(world)); /* NCCL frees the communicator's memory */
  OK(prismNcclFootprint(&planned, &allocated));
  EXPECT(planned == 5 << 20 && allocated == 0);
  OK(ncclCommDestroy(other));
  OK(prismNcclFootprint(&planned, NULL));
  EXPECT(planned == 0);
  printf("footprint ok\n");
  return 0;
}
