#!/usr/bin/env python3
"""torch's own TCPStore client against PrismLLM's rendezvous store.

Run by rendezvous_store_torch_test.cc as `tcpstore_torch_test.py HOST PORT`
against a store for a world of 8 ranks whose real ranks are 1 and 5. Prints
one line per check and exits non-zero at the first failure. Works with torch
1.13 (Debian 12's python3-torch) and 2.x.
"""

import inspect
import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

HOST, PORT = sys.argv[1], int(sys.argv[2])
WORLD, REAL = 8, (1, 5)


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        sys.exit(1)


def client(timeout_s=10):
    return dist.TCPStore(HOST, PORT, WORLD, False, timedelta(seconds=timeout_s))


def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


print(f"torch {torch.__version__}", flush=True)
s = client()

# The key-value store.
s.set("a", "1")
check(s.get("a") == b"1", "set / get")
check(s.add("n", 5) == 5 and s.add("n", 2) == 7, "add")
check(s.compare_set("c", "", "x") == b"x", "compare_set creates with an empty expected value")
check(s.compare_set("c", "no", "y") == b"x", "compare_set keeps a different value")
check(s.compare_set("c", "x", "y") == b"y", "compare_set swaps a matching value")
check(s.delete_key("c") and not s.delete_key("c"), "delete_key")
check(s.num_keys() >= 3, f"num_keys ({s.num_keys()})")
s.wait(["a", "n"])
check(True, "wait for present keys")

other = client()
later(0.3, lambda: other.set("late", "here"))
t0 = time.time()
check(s.get("late") == b"here" and time.time() - t0 > 0.2,
      "a blocking get is answered after another client's set")

w = client()
try:
    w.wait(["never"], timedelta(milliseconds=300))
    check(False, "wait for a missing key times out")
except RuntimeError as e:
    check(True, f"wait for a missing key times out ({e})")

# Keys as init_process_group writes them under TORCHELASTIC_USE_AGENT_STORE.
def pg_store(c):
    return dist.PrefixStore("default_pg", dist.PrefixStore("/worker/attempt_0", c))

rank1, rank5 = pg_store(client()), pg_store(client())

# torch 1.13's _store_based_barrier: add 1, then add 0 until it equals the
# world size (the count of every rank, virtual ones included).
key = "store_based_barrier_key:1"
first = rank1.add(key, 1)
check(first == WORLD - len(REAL) + 1, f"the first real rank's barrier add counts the virtual ranks ({first})")
check(rank5.add(key, 1) == WORLD and rank1.add(key, 0) == WORLD, "the last real rank completes the barrier")

barrier = dist.distributed_c10d._store_based_barrier
if "group_name" in inspect.signature(barrier).parameters:  # torch 2.x
    threads = [threading.Thread(target=barrier, args=(r, st, "g", WORLD, timedelta(seconds=10)))
               for r, st in ((1, rank1), (5, rank5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(True, "torch's own _store_based_barrier completes")
else:
    print("skip: torch 1.13's _store_based_barrier needs an initialized default group", flush=True)

# The default group's NCCL id: its rank 0 is virtual.
for name, ids in (("1.13", dist.PrefixStore("0", rank5)),
                  ("2.x", dist.PrefixStore("cuda/", dist.PrefixStore("0/", rank5)))):
    v = ids.get("0")
    check(len(v) == 128 and v[:8] == b"prism-id", f"a virtual root's NCCL id is synthesized ({name} keys)")
check(dist.PrefixStore("0", rank5).get("0:5")[:8] == b"prism-id", "so is a send/recv pair's with a virtual lower rank")

# Subgroups: declared by a frontend; a real root publishes its own id.
s.set("prism/group/3", "0,1,5")
check(dist.PrefixStore("3", rank1).get("0")[:8] == b"prism-id", "a declared subgroup's virtual root")
s.set("prism/group/4", "1,5")
later(0.3, lambda: dist.PrefixStore("4", rank1).set("0", b"real-id"))
check(dist.PrefixStore("4", rank5).get("0") == b"real-id", "a real root's id reaches its peer")

# Gloo cannot form with virtual ranks: the store refuses it.
os.environ.update(MASTER_ADDR=HOST, MASTER_PORT=str(PORT), RANK="1", WORLD_SIZE=str(WORLD),
                  TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0",
                  GLOO_SOCKET_IFNAME="lo")
try:
    dist.init_process_group(backend="gloo", init_method="env://", timeout=timedelta(seconds=10))
    check(False, "init_process_group(backend='gloo') is refused")
except Exception as e:  # torch raises RuntimeError or DistNetworkError
    check(True, f"init_process_group(backend='gloo') is refused ({type(e).__name__})")

print("PASS", flush=True)
