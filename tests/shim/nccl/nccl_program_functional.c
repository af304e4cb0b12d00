/* "functional": every implemented entry point against the fake coordinator
 * of nccl_shim_test.cc, which checks the messages against what this prints
 * and the sequence below. Runs as RANK=1 of WORLD_SIZE=4, LOCAL_RANK=3. */
#include "nccl_program.h"

static char buf[1 << 16];

/* Three communicators: comm 0 (4 ranks, rank 1), comm 1 (2 ranks, rank 0,
 * with a config), comm 2 (8 ranks, rank 5, from two ids). */
static void init_comms(ncclComm_t* world, ncclComm_t* pair, ncclComm_t* wide) {
  ncclUniqueId id, pair_id, ids[2];
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(world, 4, id, 1));
  printf("id_hash 0 %llu\n", (unsigned long long)fnv1a(&id, sizeof id, FNV_OFFSET));
  int x = -1;
  OK(ncclCommCount(*world, &x));
  EXPECT(x == 4);
  OK(ncclCommUserRank(*world, &x));
  EXPECT(x == 1);
  OK(pncclCommCuDevice(*world, &x));
  EXPECT(x == 3); /* LOCAL_RANK without a CUDA context */

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  OK(ncclGetUniqueId(&pair_id));
  OK(pncclCommInitRankConfig(pair, 2, pair_id, 0, &config));
  printf("id_hash 1 %llu\n", (unsigned long long)fnv1a(&pair_id, sizeof pair_id, FNV_OFFSET));
  OK(ncclGetUniqueId(&ids[0]));
  OK(ncclGetUniqueId(&ids[1]));
  OK(ncclCommInitRankScalable(wide, 8, 5, 2, ids, NULL));
  printf("id_hash 2 %llu\n", (unsigned long long)fnv1a(ids, sizeof ids, FNV_OFFSET));
}

/* The ops the fake coordinator must see, in this order (see the test). */
static void collectives(ncclComm_t world) {
  cudaStream_t s1 = (cudaStream_t)(uintptr_t)0x1000, s2 = (cudaStream_t)(uintptr_t)0x2000;
  OK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, world, s1));
  OK(ncclBroadcast(NULL, buf, 100, ncclBfloat16, 2, world, s1)); /* non-root: no sendbuff */
  OK(ncclBcast(buf, 10, ncclInt64, 0, world, NULL));
  OK(ncclReduce(buf, NULL, 16, ncclFloat16, ncclMax, 3, world, s2)); /* non-root: no recvbuff */
  OK(ncclAllGather(buf, buf, 256, ncclBfloat16, world, s1));
  OK(ncclReduceScatter(buf, buf, 128, ncclFloat32, ncclAvg, world, s1));
  OK(pncclAlltoAll(buf, buf, 64, ncclInt8, world, s1));
  OK(ncclGroupStart());
  OK(ncclSend(buf, 32, ncclUint8, 0, world, s2));
  OK(ncclRecv(buf, 32, ncclUint8, 2, world, s2));
  OK(ncclSend(buf, 32, ncclUint8, 1, world, s2)); /* to itself: a local copy, not entered */
  OK(ncclGroupEnd());
  OK(ncclGroupStart());
  OK(ncclGroupStart());
  OK(ncclAllReduce(buf, buf, 3, ncclUint32, ncclProd, world, s1));
  OK(ncclGroupEnd());                               /* nested: nothing happens yet */
  OK(pncclRecv(buf, 0, ncclFloat64, 3, world, s1)); /* 0 bytes: still a transfer */
  OK(ncclGroupEnd());
  OK(ncclAllReduce(buf, buf, 0, ncclFloat32, ncclSum, world, s1)); /* 0 elements: no op */
}

static void argument_errors(ncclComm_t world) {
  EXPECT_ERROR(ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, world, NULL),
               ncclInvalidArgument, "ncclAllReduce: datatype 99 is not an ncclDataType_t");
  EXPECT_ERROR(ncclAllReduce(buf, buf, 4, ncclFloat32, (ncclRedOp_t)99, world, NULL),
               ncclInvalidArgument, "reduction op 99 is neither built in");
  EXPECT_ERROR(ncclBroadcast(buf, buf, 4, ncclFloat32, 4, world, NULL), ncclInvalidArgument,
               "ncclBroadcast: root 4 is outside the communicator's ranks 0..3");
  EXPECT_ERROR(ncclReduce(buf, NULL, 4, ncclFloat32, ncclSum, 1, world, NULL), ncclInvalidArgument,
               "ncclReduce: recvbuff is NULL");
  EXPECT_ERROR(ncclAllGather(NULL, buf, 4, ncclFloat32, world, NULL), ncclInvalidArgument,
               "ncclAllGather: sendbuff is NULL");
  EXPECT_ERROR(ncclSend(buf, 4, ncclFloat32, -1, world, NULL), ncclInvalidArgument,
               "ncclSend: peer -1 is outside");
  EXPECT_ERROR(ncclRecv(NULL, 4, ncclFloat32, 0, world, NULL), ncclInvalidArgument,
               "ncclRecv: recvbuff is NULL");
  EXPECT_ERROR(ncclAlltoAll(buf, buf, (size_t)1 << 62, ncclFloat64, world, NULL),
               ncclInvalidArgument, "is too large");
  ncclComm_t out = (ncclComm_t)(uintptr_t)1;
  OK(ncclCommSplit(world, NCCL_SPLIT_NOCOLOR, 0, &out, NULL));
  EXPECT(out == NULL);
  EXPECT_ERROR(ncclCommSplit(world, -7, 0, &out, NULL), ncclInvalidArgument, "color -7");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT_ERROR(ncclCommSplit(world, 1, 0, &out, &bad), ncclInvalidArgument, "bad magic");
  /* A color: the coordinator says the members (the fake one: ranks 1 and 3). */
  int n = 0, me = -1;
  OK(pncclCommSplit(world, 1, 7, &out, NULL));
  EXPECT(out != NULL);
  OK(ncclCommCount(out, &n));
  OK(ncclCommUserRank(out, &me));
  EXPECT(n == 2 && me == 0);
  OK(ncclCommDestroy(out));
}

static void reductions(ncclComm_t world, ncclComm_t pair) {
  float scale = 0.5f;
  ncclRedOp_t op;
  OK(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, world));
  EXPECT((int)op >= (int)ncclNumOps);
  OK(ncclAllReduce(buf, buf, 8, ncclFloat32, op, world, NULL)); /* op: all_reduce of 32 B */
  EXPECT_ERROR(ncclAllReduce(buf, buf, 8, ncclFloat32, op, pair, NULL), ncclInvalidArgument,
               "nor made by ncclRedOpCreatePreMulSum on this communicator");
  EXPECT_ERROR(ncclRedOpDestroy(op, pair), ncclInvalidArgument, "was not made");
  OK(pncclRedOpDestroy(op, world));
  EXPECT_ERROR(ncclRedOpDestroy(op, world), ncclInvalidArgument, "destroyed already");
  EXPECT_ERROR(ncclRedOpDestroy(ncclSum, world), ncclInvalidArgument, "op 0 is built in");
  EXPECT_ERROR(ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat32, ncclScalarDevice, world),
               ncclInvalidArgument, "scalar is NULL");
  EXPECT_ERROR(ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, (ncclScalarResidence_t)7, world),
               ncclInvalidArgument, "residence 7");
}

static void memory(ncclComm_t world, ncclComm_t pair) {
  void* p = NULL;
  OK(ncclMemAlloc(&p, 1 << 20)); /* reported: the rank is connected */
  printf("mem %llu\n", (unsigned long long)(uintptr_t)p);
  void* handle = NULL;
  OK(ncclCommRegister(world, p, 1 << 20, &handle));
  EXPECT_ERROR(ncclCommDeregister(pair, handle), ncclInvalidArgument, "not a registration");
  OK(pncclCommDeregister(world, handle));
  EXPECT_ERROR(ncclCommRegister(world, NULL, 4, &handle), ncclInvalidArgument, "buff is NULL");
  ncclWindow_t win = NULL;
  OK(ncclCommWindowRegister(world, p, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
  EXPECT(win != NULL);
  EXPECT_ERROR(ncclCommWindowDeregister(pair, win), ncclInvalidArgument, "not a window");
  OK(ncclCommWindowDeregister(world, win));
  EXPECT_ERROR(ncclCommWindowRegister(world, p, 16, &win, 0x10), ncclInvalidArgument,
               "winFlags 0x10");
  OK(ncclCommRegister(world, p, 64, &handle)); /* left registered: freed with the comm */
  OK(ncclMemFree(p));
}

int run_functional(void) {
  ncclComm_t world = NULL, pair = NULL, wide = NULL;
  init_comms(&world, &pair, &wide);
  OK(prismNcclMarker(0, 1)); /* connected now: the marker is sent */
  EXPECT_ERROR(prismNcclMarker(9, 0), ncclInvalidArgument, "marker code 9 is not 0..3");
  collectives(world);
  argument_errors(world);
  reductions(world, pair);
  memory(world, pair);
  ncclResult_t async = ncclInternalError;
  OK(ncclCommGetAsyncError(world, &async));
  EXPECT(async == ncclSuccess);
  OK(ncclCommFinalize(world));
  EXPECT_ERROR(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, world, NULL), ncclInvalidUsage,
               "communicator 0 was finalized");
  OK(ncclCommDestroy(world));
  OK(pncclCommDestroy(pair));
  OK(ncclCommAbort(wide));
  fflush(stdout);
  return 0; /* the goodbye is sent at exit */
}
