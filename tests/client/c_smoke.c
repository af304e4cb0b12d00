/* Compiled as C: include/prism/client.h is valid C, and a C program can
 * play a rank with it. Called from client_test.cc against a fake
 * coordinator. Returns 0, or the step that failed. */
#include <stddef.h>
#include <string.h>

#include "prism/client.h"

int prism_c_smoke(const char* address, char* error, size_t error_size) {
  prism_client* c = NULL;
  prism_status s = prism_connect(address, 1, 4, 1, "c_smoke", 5000, &c);
  if (s != PRISM_OK) {
    strncpy(error, prism_last_error(c), error_size - 1);
    prism_close(c, 1);
    return 1;
  }
  const int32_t members[4] = {0, 1, 2, 3};
  if (prism_comm_init(c, 7, 4, 1, members, 42) != PRISM_OK) return 2;
  prism_op op;
  memset(&op, 0, sizeof op);
  op.comm = 7;
  op.code = PRISM_ALL_REDUCE;
  op.dtype = PRISM_BFLOAT16;
  op.bytes = 1 << 20;
  uint64_t ticket = 0;
  const int64_t entered = prism_now(c);
  if (prism_enter(c, &op, &ticket) != PRISM_OK) return 3;
  /* The op completes 50 us after it is entered: probably not yet. */
  int done = 0;
  if (prism_test(c, ticket, &done) != PRISM_OK) return 4;
  if (!done && prism_wait(c, ticket) != PRISM_OK) return 5;
  if (prism_now(c) < entered + 50000) return 6;
  /* Nothing outstanding: a wait needs a deadline, and reaches it. */
  uint64_t any = 0;
  if (prism_wait_any(c, PRISM_NO_LIMIT, &any) != PRISM_ERR_ARGUMENT) return 7;
  const int64_t until = prism_now(c) + 100000;
  if (prism_wait_any(c, until, &any) != PRISM_OK || any != PRISM_NO_TICKET) return 8;
  if (prism_now(c) < until) return 9;
  uint64_t second = 0;
  if (prism_enter(c, &op, &second) != PRISM_OK) return 10;
  if (prism_wait_any(c, PRISM_NO_LIMIT, &any) != PRISM_OK || any != second) return 11;
  if (prism_marker(c, 1, 0) != PRISM_OK) return 12;
  if (prism_memory(c, 0, 0x1000, 4096, 0) != PRISM_OK) return 13;
  if (prism_compute(c, 0, 1000, "kernel") != PRISM_OK) return 14;
  prism_stats stats;
  if (prism_get_stats(c, &stats) != PRISM_OK || stats.messages < 8 || stats.overhead_ns <= 0)
    return 17;
  /* A ticket already waited for is an argument error, with a message. */
  if (prism_wait(c, ticket) != PRISM_ERR_ARGUMENT) return 15;
  strncpy(error, prism_last_error(c), error_size - 1);
  if (prism_close(c, 0) != PRISM_OK) return 16;
  return 0;
}
