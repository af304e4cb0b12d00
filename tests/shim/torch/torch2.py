"""torch 2.x's coalesced tensor collectives, as functional collectives
(DTensor, FSDP2) and _coalescing_manager call them, and the refusal of
objects from other ranks, on rank 0 of 4 (torch_backend_test.cc checks what
reached the coordinator)."""

import sys

import torch
import torch.distributed as dist


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(3)


if int(torch.__version__.split(".")[0]) < 2:
    print("SKIP: torch", torch.__version__, flush=True)
    sys.exit(0)

import torch.distributed._functional_collectives as funcol  # noqa: E402

dist.init_process_group(backend="gloo", init_method="env://")
W = dist.get_world_size()
group = dist.group.WORLD

# A functional all-gather: allgather_into_tensor_coalesced of one pair.
out = funcol.all_gather_tensor(torch.tensor([1.0, 2.0]), 0, group)
out = funcol.wait_tensor(out) if hasattr(funcol, "wait_tensor") else out
check(torch.equal(out, torch.tensor([1.0, 2.0] * W)), f"functional all_gather {out}")

# A functional reduce-scatter (sum): reduce_scatter_tensor_coalesced of one.
out = funcol.reduce_scatter_tensor(torch.arange(8, dtype=torch.float32), "sum", 0, group)
out = funcol.wait_tensor(out) if hasattr(funcol, "wait_tensor") else out
check(torch.equal(out, torch.tensor([0.0, 4.0])), f"functional reduce_scatter {out}")

# Two all-gathers and two reduce-scatters coalesced: one group of ops each.
o1, o2 = torch.zeros(8), torch.zeros(4, dtype=torch.float32)
with dist._coalescing_manager():
    dist.all_gather_into_tensor(o1, torch.tensor([3.0, 4.0]))
    dist.all_gather_into_tensor(o2, torch.tensor([5.0]))
check(torch.equal(o1, torch.tensor([3.0, 4.0] * W)) and torch.equal(o2, torch.full((4,), 5.0)),
      f"coalesced all_gather_into_tensor {o1} {o2}")
r1, r2 = torch.zeros(1), torch.zeros(2)
with dist._coalescing_manager():
    dist.reduce_scatter_tensor(r1, torch.full((4,), 2.0), op=dist.ReduceOp.AVG)
    dist.reduce_scatter_tensor(r2, torch.full((8,), 2.0), op=dist.ReduceOp.AVG)
check(torch.equal(r1, torch.full((1,), 2.0)) and torch.equal(r2, torch.full((2,), 2.0)),
      f"coalesced reduce_scatter_tensor AVG {r1} {r2}")

# batch_isend_irecv: NCCL-style coalescing, the sends and receives entered
# at the end as one group; every work completes with it.
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(3), 1),
                                dist.P2POp(dist.irecv, torch.full((5,), 7.0), 3, tag=2)])
for w in works:
    w.wait()
check(all(w.is_completed() for w in works), "batch_isend_irecv completed")
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(2), 2)])
works[0].wait()

# Objects: a broadcast from this rank runs (sizes, then bytes); receiving
# another rank's object is refused before any op is entered.
dist.broadcast_object_list([{"shape": (2, 3)}], src=0)
for call in (lambda: dist.recv_object_list([None], src=1),
             lambda: dist.broadcast_object_list([None], src=2)):
    try:
        call()
        check(False, "an object from another rank accepted")
    except RuntimeError as e:
        print(f"REFUSED: {e}", flush=True)

try:
    dist.split_group(split_ranks=[[0, 1], [2, 3]])
    check(False, "split_group accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)

dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
print("DONE", flush=True)
