"""A program whose NCCL is PrismLLM's drop-in (PRISM_NCCL_DROPIN=1, the
drop-in in LD_PRELOAD), played on CPU: torch 1.13 here has no CUDA, so the
default group is gloo over a HashStore of its own (world of 1), and the
drop-in is driven through ctypes the way ProcessGroupNCCL would drive it.
prism_torch must leave the backend alone, declare each new group's ranks to
the store, and send iteration markers through the drop-in's connection."""

import ctypes

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
print("backend", dist.get_backend(), flush=True)
group = dist.new_group([0])
name = c10d._pg_names[group]
print("declared", name, c10d._get_default_store().get(f"prism/group/{name}").decode(), flush=True)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


nccl = ctypes.CDLL("libnccl.so.2")
uid, comm = UniqueId(), ctypes.c_void_p()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
assert nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) == 0  # connects

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    model(torch.ones(8, 4)).sum().backward()
    optimizer.step()
assert nccl.ncclCommDestroy(comm) == 0
print("DONE", flush=True)
