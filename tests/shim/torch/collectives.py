"""Every torch.distributed collective, as an unmodified program calls them,
on rank 0 of 4 (torch_backend_test.cc checks what reached the coordinator).
Also checks the data each leaves, under the symmetric assumption: virtual
peers hold what this rank holds."""

import sys

import torch
import torch.distributed as dist


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(3)


dist.init_process_group(backend="gloo", init_method="env://")
W = dist.get_world_size()
check(W == 4 and dist.get_rank() == 0, "rank 0 of 4")
check(dist.get_backend() == "prism", f"backend {dist.get_backend()}")

t = torch.ones(10)
dist.all_reduce(t)
check(torch.equal(t, torch.full((10,), 4.0)), f"all_reduce SUM: {t}")

t = torch.arange(3)
dist.all_reduce(t, op=dist.ReduceOp.MAX)
check(torch.equal(t, torch.arange(3)), "all_reduce MAX")

t = torch.zeros(8, dtype=torch.float16)
dist.broadcast(t, src=1)
check(torch.equal(t, torch.zeros(8, dtype=torch.float16)), "broadcast from another root")

t = torch.ones(4, dtype=torch.bfloat16)
dist.reduce(t, dst=0)
check(torch.equal(t, torch.full((4,), 4.0, dtype=torch.bfloat16)), "reduce at the root")

x = torch.tensor([1.0, 2.0, 3.0])
outs = [torch.zeros(3) for _ in range(W)]
dist.all_gather(outs, x)
check(all(torch.equal(o, x) for o in outs), "all_gather")

out = torch.zeros(8, dtype=torch.int32)
dist.all_gather_into_tensor(out, torch.tensor([5, 6], dtype=torch.int32))
check(torch.equal(out, torch.tensor([5, 6] * 4, dtype=torch.int32)), f"all_gather_into_tensor {out}")

out = torch.zeros(2)
dist.reduce_scatter(out, [torch.full((2,), float(i + 1)) for i in range(W)])
check(torch.equal(out, torch.full((2,), 4.0)), f"reduce_scatter {out}")

out = torch.zeros(2)
dist.reduce_scatter_tensor(out, torch.arange(8, dtype=torch.float32))
check(torch.equal(out, torch.tensor([0.0, 4.0])), f"reduce_scatter_tensor {out}")

x = torch.arange(8)
out = torch.zeros(8, dtype=torch.int64)
dist.all_to_all_single(out, x)
check(torch.equal(out, x), "all_to_all_single")

ins = [torch.full((2,), float(j)) for j in range(W)]
outs = [torch.zeros(2) for _ in range(W)]
dist.all_to_all(outs, ins)
check(all(torch.equal(o, i) for o, i in zip(outs, ins)), "all_to_all")

dist.send(torch.ones(5), dst=2, tag=7)
t = torch.full((5,), 9.0)
dist.recv(t, src=3, tag=5)
check(torch.equal(t, torch.zeros(5)), "recv zeroes the buffer")

w1 = dist.isend(torch.ones(2), dst=1)
w2 = dist.irecv(torch.ones(2), src=1)
w1.wait()
w2.wait()
check(w1.is_completed() and w2.is_completed(), "isend/irecv completed")

dist.barrier()

a, b = torch.ones(3), torch.ones(5)
dist.all_reduce_coalesced([a, b])
check(torch.equal(a, torch.full((3,), 4.0)) and torch.equal(b, torch.full((5,), 4.0)),
      "all_reduce_coalesced")

ins = [torch.ones(2), torch.ones(3)]
outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(W)]
dist.all_gather_coalesced(outs, ins)
check(all(torch.equal(o[0], ins[0]) and torch.equal(o[1], ins[1]) for o in outs),
      "all_gather_coalesced")

x = torch.tensor([7.0, 8.0, 9.0])
slots = [torch.zeros(3) for _ in range(W)]
dist.gather(x, gather_list=slots, dst=0)
check(all(torch.equal(s, x) for s in slots), "gather at the root")
dist.gather(x, dst=1)

out = torch.zeros(3)
dist.scatter(out, scatter_list=[torch.full((3,), float(r)) for r in range(W)], src=0)
check(torch.equal(out, torch.zeros(3)), "scatter at the root keeps its own chunk")

t = torch.ones(6)
work = dist.all_reduce(t, async_op=True)
value = work.get_future().wait()
check(isinstance(value, list) and torch.equal(value[0], torch.full((6,), 4.0)), f"future {value}")
check(work.is_completed() and work.is_success(), "async work completed")

sub = dist.new_group([0, 2], backend="nccl")
t = torch.ones(4)
dist.all_reduce(t, group=sub)
check(torch.equal(t, torch.full((4,), 2.0)), "all_reduce in a group of 2")
dist.send(torch.ones(1), dst=2, group=sub)
other = dist.new_group([1, 3])
check(other == dist.GroupMember.NON_GROUP_MEMBER, "not a member of [1, 3]")

try:
    dist.all_reduce(torch.ones(2, dtype=torch.int16))
    check(False, "int16 accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)

try:
    dist.all_to_all_single(torch.zeros(8), torch.ones(8), [2, 2, 2, 1], [2, 2, 2, 2])
    check(False, "split sizes that do not add up accepted")
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)

dist.destroy_process_group(sub)
dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
print("DONE", flush=True)
