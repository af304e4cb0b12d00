/* nccl_program: a C program that uses NCCL through libnccl.so.2, the way
 * an unmodified program would (linked by the SONAME, nothing of PrismLLM's
 * included). nccl_shim_test.cc runs it against coordinators, one mode per
 * run; each mode checks what NCCL returns, and the test checks what the
 * coordinator received. On a failed check it prints the line and the last
 * NCCL error and exits 1. */
#ifndef PRISM_TESTS_NCCL_PROGRAM_H_
#define PRISM_TESTS_NCCL_PROGRAM_H_

#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPECT(cond)                                                                            \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "%s:%d: %s failed (ncclGetLastError: '%s')\n", __FILE__, __LINE__, #cond, \
              ncclGetLastError(NULL));                                                          \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

/* The call returns `code` and ncclGetLastError() then contains `text`. */
#define EXPECT_ERROR(call, code, text)                    \
  do {                                                    \
    EXPECT((call) == (code));                             \
    EXPECT(strstr(ncclGetLastError(NULL), text) != NULL); \
  } while (0)

#define OK(call) EXPECT((call) == ncclSuccess)

/* FNV-1a 64, as the drop-in hashes unique ids for the coordinator. */
uint64_t fnv1a(const void* data, size_t n, uint64_t h);
#define FNV_OFFSET 14695981039346656037ull

int run_offline(void);
int run_functional(void);
int run_abort(void);
int run_emulate(void);
int run_mismatch(void);
/* Not NCCL's: the drop-in's iteration marker (src/shim/nccl/api_prism.cc). */
ncclResult_t prismNcclMarker(int code, int value);
int run_split(void);
int run_data(void);
int run_footprint(void);

#endif /* PRISM_TESTS_NCCL_PROGRAM_H_ */
