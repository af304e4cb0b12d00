"""A program whose emulation is aborted under it: it must fail with the
coordinator's message, not hang. argv[1]: "wait" (Work.wait) or "future"
(a future, as DDP's reducer waits)."""

import sys

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo", init_method="env://")
for _ in range(20):
    t = torch.ones(4)
    if sys.argv[1] == "wait":
        dist.all_reduce(t)
    else:
        dist.all_reduce(t, async_op=True).get_future().wait()
print("NOT ABORTED", flush=True)
