"""Two all-reduces of 1000 floats against a real coordinator whose virtual
peers compute 30 ms before each (torch_coordinator_test.cc): the first
waited for through its future (the progress thread), the second with
Work.wait. Prints the virtual times at which the program saw them."""

import torch
import torch.distributed as dist
from prism_torch import _c10d

dist.init_process_group(backend="nccl", init_method="env://")
dist.all_reduce(torch.ones(1000), async_op=True).get_future().wait()
first = _c10d.now()
t = torch.ones(1000)
dist.all_reduce(t)
second = _c10d.now()
assert torch.equal(t, torch.full((1000,), 4.0)), t
print(f"FIRST_NS {first}")
print(f"SECOND_NS {second}")
