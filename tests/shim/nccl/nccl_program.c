/* The modes that need no coordinator ("offline") or a real one ("emulate",
 * "abort"), and main(). The "functional" mode, against the fake
 * coordinator, is in nccl_program_functional.c. */
#include "nccl_program.h"

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* Every entry point the drop-in does not implement, as ncclX and pncclX. */
static void check_unsupported(void) {
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  int exclude = 0;
  char buf[64];
#define UNSUPPORTED(name, args)                                                                    \
  EXPECT_ERROR(name args, ncclInvalidUsage, #name " is not supported by PrismLLM's NCCL drop-in"); \
  EXPECT_ERROR(p##name args, ncclInvalidUsage, #name " is not supported")
  UNSUPPORTED(ncclCommInitAll, (comms, 2, devs));
  UNSUPPORTED(ncclCommRevoke, (NULL, NCCL_REVOKE_DEFAULT));
  UNSUPPORTED(ncclCommShrink, (NULL, &exclude, 1, comms, &config, NCCL_SHRINK_DEFAULT));
  UNSUPPORTED(ncclGather, (buf, buf, 4, ncclFloat32, 0, NULL, NULL));
  UNSUPPORTED(ncclScatter, (buf, buf, 4, ncclFloat32, 0, NULL, NULL));
  UNSUPPORTED(ncclGroupSimulateEnd, (&sim));
#undef UNSUPPORTED
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  ncclResetDebugInit(); /* a no-op: there is no NCCL_DEBUG logging */
  pncclResetDebugInit();
#pragma GCC diagnostic pop
}

/* Entry points given no communicator, or one that is not a communicator. */
static void check_bad_comms(void) {
  static uint64_t garbage[64]; /* zeros: not a communicator */
  ncclComm_t fake = (ncclComm_t)(void*)garbage;
  ncclComm_t out = NULL;
  int x = 0;
  ncclResult_t async = ncclSuccess;
  char buf[16];
  EXPECT_ERROR(ncclCommCount(NULL, &x), ncclInvalidArgument, "ncclCommCount: comm is NULL");
  EXPECT_ERROR(ncclCommUserRank(fake, &x), ncclInvalidArgument, "not a live communicator");
  EXPECT_ERROR(ncclCommCuDevice(NULL, &x), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclCommGetAsyncError(NULL, &async), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclCommFinalize(fake), ncclInvalidArgument, "ncclCommFinalize");
  EXPECT_ERROR(ncclCommSplit(NULL, 0, 0, &out, NULL), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclAllReduce(buf, buf, 1, ncclInt8, ncclSum, NULL, NULL), ncclInvalidArgument,
               "ncclAllReduce: comm is NULL");
  EXPECT_ERROR(ncclSend(buf, 1, ncclInt8, 0, fake, NULL), ncclInvalidArgument, "ncclSend");
  EXPECT_ERROR(ncclCommRegister(NULL, buf, 1, (void**)&out), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclRedOpDestroy((ncclRedOp_t)5, NULL), ncclInvalidArgument, "comm is NULL");
  OK(ncclCommDestroy(NULL)); /* as NCCL */
  OK(ncclCommAbort(NULL));
}

int run_offline(void) {
  int version = 0;
  OK(ncclGetVersion(&version));
  EXPECT(version == NCCL_VERSION_CODE);
  OK(prismNcclMarker(0, 0)); /* not connected: nothing to mark, nothing sent */
  OK(pncclGetVersion(&version));
  EXPECT_ERROR(ncclGetVersion(NULL), ncclInvalidArgument, "ncclGetVersion: version is NULL");
  EXPECT(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0);
  for (int r = 1; r < ncclNumResults; ++r)
    EXPECT(strcmp(ncclGetErrorString((ncclResult_t)r), ncclGetErrorString((ncclResult_t)0)) != 0);
  EXPECT(strcmp(pncclGetErrorString(ncclNumResults), "unknown result code") == 0);

  ncclUniqueId a, b;
  OK(ncclGetUniqueId(&a));
  OK(pncclGetUniqueId(&b));
  EXPECT(memcmp(&a, &b, sizeof a) != 0);
  EXPECT_ERROR(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId is NULL");

  ncclComm_t comm = NULL;
  unsetenv("PRISM_COORDINATOR");
  EXPECT_ERROR(ncclCommInitRank(&comm, 4, a, 0), ncclInvalidUsage,
               "ncclCommInitRank: PRISM_COORDINATOR is not set: run the program under "
               "`prism emulate`");
  EXPECT(comm == NULL);
  EXPECT_ERROR(ncclCommInitRank(&comm, 0, a, 0), ncclInvalidArgument, "nranks 0 is below 1");
  EXPECT_ERROR(ncclCommInitRank(&comm, 4, a, 4), ncclInvalidArgument, "rank 4 is outside 0..3");
  EXPECT_ERROR(ncclCommInitRank(NULL, 4, a, 0), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclCommInitRankScalable(&comm, 4, 0, 0, &a, NULL), ncclInvalidArgument,
               "nId 0 is below 1");
  ncclConfig_t bad;
  memset(&bad, 0, sizeof bad);
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 4, a, 0, &bad), ncclInvalidArgument,
               "NCCL_CONFIG_INITIALIZER");
  setenv("PRISM_COORDINATOR", "unix:/nonexistent/prism.sock", 1);
  unsetenv("RANK");
  EXPECT_ERROR(ncclCommInitRank(&comm, 4, a, 0), ncclInvalidUsage, "RANK is not set");
  setenv("RANK", "x1", 1);
  EXPECT_ERROR(ncclCommInitRank(&comm, 4, a, 0), ncclInvalidUsage,
               "RANK='x1' is not a non-negative integer");
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "4", 1);
  EXPECT_ERROR(ncclCommInitRank(&comm, 4, a, 0), ncclSystemError,
               "cannot join the emulation at unix:/nonexistent/prism.sock as rank 0 of 4");

  check_unsupported();
  check_bad_comms();

  /* Groups need no communicator. */
  OK(ncclGroupStart());
  OK(pncclGroupStart());
  OK(ncclGroupEnd());
  OK(pncclGroupEnd());
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "no ncclGroupStart is open");

  /* ncclMemAlloc without CUDA: page-aligned host memory, usable. */
  void* p = NULL;
  OK(ncclMemAlloc(&p, 10000));
  EXPECT(p != NULL && ((uintptr_t)p % 4096) == 0);
  memset(p, 1, 10000);
  OK(ncclMemFree(p));
  EXPECT_ERROR(ncclMemFree(p), ncclInvalidArgument, "ptr was not allocated by ncclMemAlloc");
  OK(ncclMemFree(NULL));
  EXPECT_ERROR(ncclMemAlloc(&p, 0), ncclInvalidArgument, "size is 0");
  EXPECT_ERROR(ncclMemAlloc(NULL, 8), ncclInvalidArgument, "ptr is NULL");
  return 0;
}

/* The coordinator aborts the emulation at the first op. */
int run_abort(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  float x[4] = {0};
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&comm, 2, id, 0));
  ncclResult_t async = ncclInternalError;
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess);
  EXPECT_ERROR(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL), ncclRemoteError,
               "ncclAllReduce: ");
  EXPECT(strstr(ncclGetLastError(comm), "rank 3 crashed") != NULL);
  printf("error %s\n", ncclGetLastError(comm));
  /* Every communicator now reports it in the background too. */
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclRemoteError);
  EXPECT(strstr(ncclGetLastError(comm), "rank 3 crashed") != NULL);
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess);
  OK(ncclCommAbort(comm)); /* never waits on the (gone) coordinator */
  return 0;
}

/* The coordinator hangs up at the first op (killed): the op fails, and the
 * program then stays (as one stuck in its own teardown would) until the
 * drop-in ends it after PRISM_NCCL_GONE_EXIT_S seconds. */
int run_gone(void) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  float x[4] = {0};
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&comm, 2, id, 0));
  EXPECT(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL) == ncclRemoteError);
  printf("error %s\n", ncclGetLastError(comm));
  fflush(stdout);
  sleep(30);
  printf("still here after 30 s\n");
  return 0;
}

/* Rank 0 of the 4-rank graph in nccl_emulate_test.cc, op for op. */
int run_emulate(void) {
  ncclUniqueId id;
  ncclComm_t world = NULL;
  static char buf[1 << 16];
  cudaStream_t stream = (cudaStream_t)(uintptr_t)0x5000; /* no CUDA: host path */
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&world, 4, id, 0));
  OK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, world, stream));
  OK(ncclAllGather(buf, buf, 256, ncclBfloat16, world, stream));
  OK(ncclReduceScatter(buf, buf, 256, ncclBfloat16, ncclSum, world, stream));
  OK(ncclBroadcast(buf, buf, 100, ncclInt64, 1, world, stream));
  OK(ncclReduce(buf, buf, 16, ncclFloat16, ncclMax, 0, world, stream));
  OK(ncclAlltoAll(buf, buf, 64, ncclBfloat16, world, stream));
  OK(ncclGroupStart());
  OK(ncclSend(buf, 1024, ncclUint8, 1, world, stream));
  OK(ncclRecv(buf, 1024, ncclUint8, 1, world, stream));
  OK(ncclGroupEnd());
  OK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, world, NULL));
  OK(ncclCommDestroy(world));
  return 0; /* the goodbye is sent at exit */
}

/* Rank 0 of kSplitGraph: two communicators split from the world. The first
 * color is PyTorch's for ranks {0, 2}: abs(hash((0, 2))) % 2**31. */
int run_split(void) {
  ncclUniqueId id;
  ncclComm_t world = NULL, evens = NULL, pairs = NULL;
  static float x[64];
  int n = 0, me = -1;
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&world, 4, id, 0));
  OK(ncclCommSplit(world, 1684518034, 0, &evens, NULL));
  OK(ncclCommSplit(world, 5, 0, &pairs, NULL));
  OK(ncclCommCount(evens, &n));
  OK(ncclCommUserRank(evens, &me));
  EXPECT(n == 2 && me == 0);
  OK(ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, world, NULL));
  OK(ncclAllReduce(x, x, 32, ncclFloat32, ncclSum, evens, NULL));
  OK(ncclAllGather(x, x, 32, ncclFloat32, pairs, NULL));
  OK(ncclCommDestroy(pairs));
  OK(ncclCommDestroy(evens));
  OK(ncclCommDestroy(world));
  return 0;
}

/* Rank 0 of the same graph enters an all-reduce of other bytes. */
int run_mismatch(void) {
  ncclUniqueId id;
  ncclComm_t world = NULL;
  static float x[999];
  OK(ncclGetUniqueId(&id));
  OK(ncclCommInitRank(&world, 4, id, 0));
  EXPECT_ERROR(ncclAllReduce(x, x, 999, ncclFloat32, ncclSum, world, NULL), ncclInvalidUsage,
               "the graph has all_reduce of 4096 bytes of fp32 here");
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(world, &async));
  EXPECT(async == ncclInvalidUsage);
  OK(ncclCommAbort(world));
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: nccl_program offline|functional|abort|gone|emulate|mismatch|split|data|footprint\n");
    return 2;
  }
  if (strcmp(argv[1], "offline") == 0) return run_offline();
  if (strcmp(argv[1], "functional") == 0) return run_functional();
  if (strcmp(argv[1], "abort") == 0) return run_abort();
  if (strcmp(argv[1], "gone") == 0) return run_gone();
  if (strcmp(argv[1], "emulate") == 0) return run_emulate();
  if (strcmp(argv[1], "mismatch") == 0) return run_mismatch();
  if (strcmp(argv[1], "split") == 0) return run_split();
  if (strcmp(argv[1], "data") == 0) return run_data();
  if (strcmp(argv[1], "footprint") == 0) return run_footprint();
  fprintf(stderr, "nccl_program: unknown mode '%s'\n", argv[1]);
  return 2;
}
