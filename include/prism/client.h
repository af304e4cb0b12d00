/* PrismLLM client: how a live rank of an emulated job talks to the
 * coordinator (docs/protocol.md). C ABI, for C and C++ programs and for
 * PrismLLM's interposers.
 *
 * A live rank connects, declares its communicators, and enters each
 * communication op. The coordinator answers with the op's completion in
 * virtual time: when the op would complete at full scale. The client keeps
 * the rank's virtual clock. Between calls, virtual time advances with the
 * real clock, because the rank's compute is real. prism_wait() holds the
 * rank until the op's completion, sleeping real time when the completion
 * lies ahead. When the coordinator's answer comes after that moment, the
 * lateness is not counted: the clock restarts at the completion. A rank
 * learns a completion only by waiting for it (prism_wait, prism_test,
 * prism_wait_any): each wait tells the coordinator how far it may simulate
 * ahead of this rank.
 *
 * One client per rank. Calls on one client must not overlap: use one
 * thread, or lock around calls. Every call returns a prism_status; after a
 * failure, prism_last_error() says what went wrong and where. Nothing waits
 * forever: each wait has the timeout given to prism_connect. */
#ifndef PRISM_CLIENT_H_
#define PRISM_CLIENT_H_

#include <stdint.h>

#ifdef __cplusplus
#define PRISM_NOEXCEPT noexcept
extern "C" {
#else
#define PRISM_NOEXCEPT
#endif

#define PRISM_API __attribute__((visibility("default")))

typedef struct prism_client prism_client;

typedef enum {
  PRISM_OK = 0,
  PRISM_ERR_ARGUMENT = 1, /* a bad argument: null pointer, unknown ticket, bad address */
  PRISM_ERR_CONNECT = 2,  /* no coordinator at the address, or none in time */
  PRISM_ERR_PROTOCOL = 3, /* the connection broke: closed, malformed, or no answer in time */
  PRISM_ERR_REJECTED = 4, /* the coordinator refused: wrong rank, unknown communicator, mismatch */
  PRISM_ERR_ABORTED = 5   /* the emulation ended: another rank failed, a timeout */
} prism_status;

/* What a communication op is. The first seven follow NCCL's collectives. */
typedef enum {
  PRISM_ALL_REDUCE = 0,
  PRISM_ALL_GATHER = 1,
  PRISM_REDUCE_SCATTER = 2,
  PRISM_BROADCAST = 3,
  PRISM_REDUCE = 4,
  PRISM_ALL_TO_ALL = 5,
  PRISM_BARRIER = 6,
  PRISM_SEND = 7,
  PRISM_RECV = 8
} prism_op_code;

/* Element types, as in the graph format (docs/graph-format.md). */
typedef enum {
  PRISM_FLOAT32 = 0,
  PRISM_FLOAT16 = 1,
  PRISM_BFLOAT16 = 2,
  PRISM_FLOAT8_E4M3 = 3,
  PRISM_FLOAT8_E5M2 = 4,
  PRISM_FLOAT64 = 5,
  PRISM_INT8 = 6,
  PRISM_UINT8 = 7,
  PRISM_INT32 = 8,
  PRISM_INT64 = 9
} prism_dtype;

typedef struct {
  uint32_t comm;   /* a handle given to prism_comm_init */
  uint16_t stream; /* the rank's stream the op runs on */
  uint8_t code;    /* prism_op_code */
  uint8_t dtype;   /* prism_dtype */
  int64_t bytes;   /* a collective's per-rank buffer, or a transfer's size */
  int32_t peer;    /* send/recv: the peer's rank in comm; broadcast/reduce: the root */
  int32_t tag;
  uint32_t group; /* nonzero for the ops of one ncclGroupStart/End */
} prism_op;

/* Connects as `rank` of `world_size` and waits for the coordinator's welcome.
 * address: "unix:PATH" or "tcp:HOST:PORT"; NULL reads $PRISM_COORDINATOR.
 * The hello carries $PRISM_SECRET, the run's secret that `prism emulate`
 * gives the ranks it starts; the coordinator refuses a hello without it.
 * timeout_ms bounds this call and every later wait; 0 means 60000. On
 * failure, *out is still set: its prism_last_error() says why, and
 * prism_close() frees it. *out is NULL only when memory ran out. */
PRISM_API prism_status prism_connect(const char* address, int32_t rank, int32_t world_size,
                                     int32_t local_rank, const char* program, int32_t timeout_ms,
                                     prism_client** out) PRISM_NOEXCEPT;

/* Declares communicator `comm` before its first op. members: nranks global
 * ranks in communicator order, or NULL when unknown (ncclCommInitRank). */
PRISM_API prism_status prism_comm_init(prism_client* c, uint32_t comm, int32_t nranks,
                                       int32_t rank_in_comm, const int32_t* members,
                                       uint64_t id_hash) PRISM_NOEXCEPT;

/* Makes communicator `comm` by splitting `parent` (ncclCommSplit): color
 * >= 0 as in NCCL (NCCL_SPLIT_NOCOLOR makes no communicator: do not call).
 * Blocks until the coordinator says which of the job's communicators it is
 * (docs/protocol.md, `comm_split`); sets *nranks and *rank_in_comm. members,
 * if not NULL, receives the global ranks in communicator order and must
 * hold max_members of them; *nranks larger than max_members is an argument
 * error. Takes no virtual time. */
PRISM_API prism_status prism_comm_split(prism_client* c, uint32_t parent, int32_t color,
                                        int32_t key, uint32_t comm, int32_t* nranks,
                                        int32_t* rank_in_comm, int32_t* members,
                                        int32_t max_members) PRISM_NOEXCEPT;

/* Enters a communication op at the rank's current virtual time. It does not
 * wait: *ticket names the op for prism_wait, prism_test and prism_wait_any. */
PRISM_API prism_status prism_enter(prism_client* c, const prism_op* op,
                                   uint64_t* ticket) PRISM_NOEXCEPT;

/* Blocks until the op completes: the answer is in and the rank's virtual
 * clock has reached the completion. The ticket is then spent. */
PRISM_API prism_status prism_wait(prism_client* c, uint64_t ticket) PRISM_NOEXCEPT;

/* The calling thread waited for an op whose ticket a poll had already spent
 * (a progress thread took the answer first, prism_poll). When the
 * coordinator is capturing the rank's program, this puts the wait on the
 * wire as prism_wait would have, so that the capture records where the rank
 * waited whichever thread took the answer; otherwise it does nothing.
 * PRISM_ERR_ARGUMENT for a ticket never entered or not yet spent. */
PRISM_API prism_status prism_waited(prism_client* c, uint64_t ticket) PRISM_NOEXCEPT;

/* 1 when the coordinator records the rank's program (a capture: every op
 * completes when entered) rather than emulating a job; else 0. */
PRISM_API int prism_capturing(prism_client* c) PRISM_NOEXCEPT;

/* Sets *done to 1 when the op has completed by the rank's current virtual
 * time (the ticket is then spent), else 0. Unless its answer is already in,
 * it blocks until the coordinator can tell: a round trip at least, which
 * virtual time does not count. */
PRISM_API prism_status prism_test(prism_client* c, uint64_t ticket, int* done) PRISM_NOEXCEPT;

/* Blocks until the first of the rank's entered, unspent ops completes, or
 * until virtual time until_ns, whichever comes first. *ticket is that op's
 * ticket, then spent (ties: the earliest completion, then the lowest
 * ticket), or PRISM_NO_TICKET when until_ns came first. An until_ns in the
 * past means now; PRISM_NO_LIMIT means no deadline, and is an argument
 * error when no op is outstanding. */
#define PRISM_NO_TICKET UINT64_MAX
#define PRISM_NO_LIMIT INT64_MAX
PRISM_API prism_status prism_wait_any(prism_client* c, int64_t until_ns,
                                      uint64_t* ticket) PRISM_NOEXCEPT;

/* For a helper thread (a progress thread) that polls while the rank's other
 * threads keep running: *ticket is an op that has completed by the rank's
 * current virtual time, then spent, or PRISM_NO_TICKET. It never blocks on
 * the coordinator: unless such an answer is in, it tells the coordinator
 * the rank's bound (a wait for any op until now, not repeated while the
 * last one is open) and takes the answers that have arrived, without
 * waiting for more. A poll that waited until the coordinator had simulated
 * up to now would wait for every other live rank's clock to get there, and
 * hold the caller's other threads out of the client meanwhile. The real
 * time a poll takes stays in the rank's virtual time instead of being
 * excluded, because the rank did not stop for it. */
PRISM_API prism_status prism_poll(prism_client* c, uint64_t* ticket) PRISM_NOEXCEPT;

/* prism_poll for the thread that has just entered ops and goes on to
 * compute: the time the wait takes to send is not counted in the rank's
 * virtual time, as prism_enter's is not. Its answer (a horizon, or a
 * completion) arrives as for prism_poll, so a progress thread waiting for
 * messages wakes for it and need not be woken for the op. */
PRISM_API prism_status prism_poll_after_enter(prism_client* c, uint64_t* ticket) PRISM_NOEXCEPT;

/* prism_poll without telling the coordinator anything: *ticket is an op
 * that has completed by the rank's current virtual time among the answers
 * that have arrived, then spent, or PRISM_NO_TICKET. Sends nothing, waits
 * for nothing: a progress thread takes answers with it as they arrive
 * (prism_wait_message) between the prism_poll calls that keep the
 * coordinator hearing from the rank. */
PRISM_API prism_status prism_poll_arrived(prism_client* c, uint64_t* ticket) PRISM_NOEXCEPT;

/* Microseconds of real time before prism_poll can find anything: the
 * coordinator answered the last poll saying that, while the rank sends
 * nothing, none of its ops completes earlier (protocol "horizon",
 * quiet_until), and prism_poll sends nothing until then. A progress thread
 * may sleep that long, as long as it wakes when its process enters an op.
 * 0 when nothing was said, the rank sent something since, or the time has
 * come; INT64_MAX when nothing completes until the rank sends something. */
PRISM_API int64_t prism_poll_quiet_us(prism_client* c) PRISM_NOEXCEPT;

/* Holds the caller up to timeout_us microseconds, or until a message from
 * the coordinator arrives (or the connection closes): 1 then, else 0. Reads
 * nothing. The one call that may run while another thread is in a prism_*
 * call on the same client: a progress thread waits here, outside its lock,
 * between prism_poll calls. A message the other thread reads meanwhile, or
 * one already read and not yet handed out, leaves it waiting the full
 * time. */
PRISM_API int prism_wait_message(prism_client* c, int64_t timeout_us) PRISM_NOEXCEPT;

/* Memory events (action 0 alloc, 1 free), iteration markers (code 0
 * iteration begin, 1 iteration end, 2 micro-batch, 3 phase), and compute
 * the rank measured, for capture. None of them waits. */
PRISM_API prism_status prism_memory(prism_client* c, int action, uint64_t id, int64_t bytes,
                                    uint16_t stream) PRISM_NOEXCEPT;
PRISM_API prism_status prism_marker(prism_client* c, int code, int32_t value) PRISM_NOEXCEPT;
PRISM_API prism_status prism_compute(prism_client* c, uint16_t stream, int64_t duration_ns,
                                     const char* name) PRISM_NOEXCEPT;

/* The device memory, in bytes, NCCL would have allocated on this rank at
 * full scale for op `ticket` (its communicator's init on first use, the
 * buffers it connected first), as the coordinator said with the op's
 * completion; given once, then 0. 0 for most ops, and when the completion
 * has not come yet. The NCCL drop-in allocates it on the GPU. */
PRISM_API int64_t prism_take_nccl_bytes(prism_client* c, uint64_t ticket) PRISM_NOEXCEPT;

/* The rank's virtual time now, ns. */
PRISM_API int64_t prism_now(const prism_client* c) PRISM_NOEXCEPT;

/* What emulation cost the rank, none of it counted in its virtual time:
 * real time spent sending messages, and real time answers came after they
 * were due (the clock restarted at the completion). */
typedef struct {
  uint64_t messages;   /* messages sent */
  int64_t overhead_ns; /* real time spent sending them */
  int64_t late_ns;     /* real time answers were late */
} prism_stats;
PRISM_API prism_status prism_get_stats(const prism_client* c, prism_stats* out) PRISM_NOEXCEPT;

/* Says goodbye (exit_code travels to the coordinator), closes and frees the
 * client. c may be NULL. Returns the goodbye's status. */
PRISM_API prism_status prism_close(prism_client* c, int32_t exit_code) PRISM_NOEXCEPT;

/* The last failure's message; "" when none. Valid until the next call. */
PRISM_API const char* prism_last_error(const prism_client* c) PRISM_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* PRISM_CLIENT_H_ */
