"""torch 2.x's coalesced tensor collectives, as functional collectives
(DTensor, FSDP2) and _coalescing_manager call them, and objects between
ranks through the store, on rank 0 of 4 (torch_backend_test.cc checks what
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

# Objects (docs/torch-backend.md, "Objects"): what this rank sends is SET in
# the store beside torch's own ops; what it receives is the store's value at
# the sender's key, here SET by the test as PrismLLM's store would answer
# for a virtual sender, delivered through the same ops as torch's.
from prism_torch import _objects  # noqa: E402

store = dist.distributed_c10d._get_default_store()
config = {"shape": (2, 3)}
dist.broadcast_object_list([config], src=0)
dist.send_object_list([config], dst=1)
for key in ("prism/object/0/group/0:1:4/0", "prism/object/0/to/1/0"):
    sizes, data = _objects._decode(store.get(key), key)
    check(len(sizes) == 1 and sizes[0] == len(data), f"{key}: sizes {sizes}, {len(data)} bytes")
store.set("prism/object/1/to/0/0", _objects._encode(dist.distributed_c10d, [config]))
store.set("prism/object/1/to/0/1", _objects._encode(dist.distributed_c10d, ["a", 7]))
store.set("prism/object/2/group/0:1:4/0",
          _objects._encode(dist.distributed_c10d, [torch.empty(2, 5, device="meta")]))
store.set("prism/object/2/group/0:1:4/1", b"PRISMERR" + b"the capture recorded none")
got = [None]
check(dist.recv_object_list(got, src=1) == 1 and got == [config], f"recv_object_list {got}")
got = [None, None]
dist.recv_object_list(got, src=1, use_batch=True)
check(got == ["a", 7], f"recv_object_list with use_batch {got}")
got = [None]
dist.broadcast_object_list(got, src=2)
check(got[0].device.type == "meta" and got[0].shape == (2, 5), f"broadcast_object_list {got}")
try:
    dist.broadcast_object_list(got, src=2)
    check(False, "a failed object accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)
store.set("prism/object/1/to/0/2", _objects._encode(dist.distributed_c10d, ["a", 7]))
try:
    dist.recv_object_list([None], src=1)
    check(False, "objects that the list's length does not fit accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)

try:
    dist.scatter_object_list([None], None, src=1)
    check(False, "scatter_object_list from another rank accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)

# all_gather_object and gather_object: this rank SETs its object, the
# others' are the store's values (here the test's, as PrismLLM's store
# answers for virtual ranks); one not known yet ("PRISMUNK") leaves this
# rank's own in its slot, with one warning; a failure is raised.
def encoded(objects):
    return _objects._encode(dist.distributed_c10d, objects)


store.set("prism/object/1/all_gather/0:1:4/0", encoded(["one"]))
store.set("prism/object/2/all_gather/0:1:4/0", b"PRISMUNK" + b"rank 2's role is captured later")
store.set("prism/object/3/all_gather/0:1:4/0", encoded([{"r": 3, "pad": "x" * 100}]))
got = [None] * W
dist.all_gather_object(got, "zero")
check(got == ["zero", "one", "zero", {"r": 3, "pad": "x" * 100}], f"all_gather_object {got}")
check(_objects._decode(store.get("prism/object/0/all_gather/0:1:4/0"), "own")[0] != [],
      "all_gather_object's own object SET")
for r in range(1, W):
    store.set(f"prism/object/{r}/gather/0:1:4/0", encoded([r * 10]))
got = [None] * W
dist.gather_object(0.5, got, dst=0)
check(got == [0.5, 10, 20, 30], f"gather_object at the destination {got}")
dist.gather_object("to one", None, dst=1)  # torch's own call, after the SET
sizes, data = _objects._decode(store.get("prism/object/0/gather/0:1:4/1"), "gather to 1")
check(len(sizes) == 1 and b"to one" in data, f"gather_object away from the destination {data}")
store.set("prism/object/1/all_gather/0:1:4/1", b"PRISMERR" + b"the capture recorded none")
try:
    dist.all_gather_object([None] * W, "again")
    check(False, "a failed gathered object accepted")
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
