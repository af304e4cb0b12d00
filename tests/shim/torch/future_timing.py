"""When a future completes in virtual time, and what polling costs the rank.

An all_reduce completes `after` ms (virtual) after it is entered. The program
computes `busy` ms meanwhile, then waits on the op's future, as DDP's reducer
does: the progress thread must complete it at its emulated time, give or
take a poll. Prints what it measured, for the test and for people."""

import sys
import time

import torch
import torch.distributed as dist
from prism_torch import _c10d

after_ms, busy_ms = float(sys.argv[1]), float(sys.argv[2])
dist.init_process_group(backend="gloo", init_method="env://")
# A first round warms Python's code paths up: their first run costs ms.
dist.all_reduce(torch.ones(4), async_op=True).get_future().wait()
v0, r0 = _c10d.now(), time.perf_counter_ns()
future = dist.all_reduce(torch.ones(4), async_op=True).get_future()
while time.perf_counter_ns() - r0 < busy_ms * 1e6:
    pass
v1, r1 = _c10d.now(), time.perf_counter_ns()
future.wait()
v2 = _c10d.now()
print(f"compute: {(v1 - v0) / 1e6:.3f} ms virtual in {(r1 - r0) / 1e6:.3f} ms real")
print(f"future done at +{(v2 - v0) / 1e6:.3f} ms virtual (completion at +{after_ms} ms)")
print(f"client: {_c10d.stats()}")
late_ms = (v2 - v0) / 1e6 - after_ms
if late_ms < 0:
    print(f"FAILED: the future completed {-late_ms:.3f} ms early")
    sys.exit(3)
print(f"LATE_MS {late_ms:.3f}")
