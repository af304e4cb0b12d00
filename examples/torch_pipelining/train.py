"""A small GPT trained with torch.distributed.pipelining (PipelineStage and
Schedule1F1B or ScheduleInterleaved1F1B) and data parallelism on CPU: an
ordinary torch.distributed program, with nothing of PrismLLM in it.

Run it as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). The
ranks form a (pp, dp) device mesh, pipeline outermost: stage = rank // dp,
as Megatron and PrismLLM's job layout order them. Each rank builds the
stages it holds (one with --schedule 1f1b; --virtual of them, round-robin,
with --schedule interleaved), each a slice of the blocks, the embeddings on
the first and the final LayerNorm, head and loss on the last. Every
PipelineStage is given its input's and output's shapes (input_args,
output_args, on the meta device), as torchtitan does; with --infer-shapes
it is not, and torch infers them at the first step, each stage but the
first receiving its input's meta tensors from the previous one with
recv_object_list. With --config-from-rank0, rank 0 decides the run's
settings (learning rate, data seed) and broadcasts them to every rank with
broadcast_object_list. With --gather-stages, after the last step every
rank all_gather_object's the stages it holds, and prints how many ranks
hold each.

Each step the schedule runs --microbatches microbatches through the
pipeline (its sends and receives are batch_isend_irecv's isend and irecv);
then each rank all-reduces its gradients over its dp group (one flattened
bucket, averaged) and takes an AdamW step.

In the CI, tests/cli/emulate_program_test.cc runs it as one real rank of the
64-rank job examples/jobs/torch-pipelining-64.yaml (pp 2 x dp 32), both
schedules, and 1F1B with --infer-shapes --config-from-rank0
--gather-stages, where the objects from virtual ranks are what the capture
recorded for their roles;
docs/torch-backend.md ("Programs", "Objects") gives the figures.
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B,
                                          ScheduleInterleaved1F1B)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Stage(nn.Module):
    """Stage `index` of `count`: its slice of the blocks, the embeddings on
    the first, the final LayerNorm and the head on the last."""

    def __init__(self, args, index, count):
        super().__init__()
        self.first, self.last = index == 0, index == count - 1
        lo, hi = index * args.layers // count, (index + 1) * args.layers // count
        if self.first:
            self.tok = nn.Embedding(args.vocab, args.dim)
            self.pos = nn.Embedding(args.seq, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(lo, hi))
        if self.last:
            self.ln = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, x):
        if self.first:  # x holds token ids
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)) if self.last else x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schedule", choices=["1f1b", "interleaved"], default="1f1b")
    p.add_argument("--pp", type=int, default=2, help="pipeline ranks")
    p.add_argument("--virtual", type=int, default=2,
                   help="stages per pipeline rank with --schedule interleaved")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--infer-shapes", action="store_true",
                   help="no input_args/output_args: torch infers the shapes at the first step")
    p.add_argument("--config-from-rank0", action="store_true",
                   help="rank 0 broadcasts the run's settings to every rank")
    p.add_argument("--gather-stages", action="store_true",
                   help="at the end, all_gather_object every rank's stages and count them")
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    config = {"lr": 3e-4, "data_seed": 1000}
    if args.config_from_rank0:
        settings = [config if rank == 0 else None]
        dist.broadcast_object_list(settings, src=0)
        config = settings[0]
        if rank != 0 and (world <= 8 or os.environ.get("PRISM_COORDINATOR")):
            print(f"torch_pipelining: rank {rank} got rank 0's config {config}", flush=True)
    if world % args.pp:
        raise SystemExit(f"torch_pipelining: {world} ranks do not split into {args.pp} stages")
    dp = world // args.pp
    mesh = init_device_mesh("cpu", (args.pp, dp), mesh_dim_names=("pp", "dp"))
    pp_rank = mesh["pp"].get_local_rank()
    virtual = args.virtual if args.schedule == "interleaved" else 1
    count = args.pp * virtual
    if args.layers < count:
        raise SystemExit(f"torch_pipelining: {args.layers} layers for {count} stages")

    mbs, device = args.micro_batch_size, torch.device("cpu")
    hidden = torch.empty(mbs, args.seq, args.dim, device="meta")
    stages, modules = [], []
    for v in range(virtual):
        index = pp_rank + v * args.pp  # round-robin, as the interleaved schedule expects
        torch.manual_seed(1234 + index)  # the same stage on every replica
        module = Stage(args, index, count)
        inputs = torch.empty(mbs, args.seq, dtype=torch.long, device="meta") if index == 0 else hidden
        outputs = (torch.empty(mbs, args.seq, args.vocab, device="meta")
                   if index == count - 1 else hidden)
        shapes = {} if args.infer_shapes else {"input_args": inputs, "output_args": outputs}
        stages.append(PipelineStage(module, index, count, device, group=mesh["pp"].get_group(),
                                    **shapes))
        modules.append(module)

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, args.vocab), target.reshape(-1))

    if args.schedule == "interleaved":
        schedule = ScheduleInterleaved1F1B(stages, args.microbatches, loss_fn=loss_fn)
    else:
        schedule = Schedule1F1B(stages[0], args.microbatches, loss_fn=loss_fn)
    has_first = any(s.is_first for s in stages)
    has_last = any(s.is_last for s in stages)
    params = [prm for m in modules for prm in m.parameters()]
    opt = torch.optim.AdamW(params, lr=config["lr"])
    dp_group = mesh["dp"].get_group()
    # Each pipeline its own batches; every stage of it draws the same tokens.
    data = torch.Generator().manual_seed(config["data_seed"] + mesh["dp"].get_local_rank())
    batch = args.microbatches * mbs

    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (batch, args.seq + 1), generator=data)
        start = time.perf_counter()
        losses = []
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        if has_first and has_last:
            schedule.step(x, target=y, losses=losses)
        elif has_first:
            schedule.step(x)
        elif has_last:
            schedule.step(target=y, losses=losses)
        else:
            schedule.step()
        if dp > 1:  # one flattened bucket, averaged over the stage's replicas
            grads = [prm.grad for prm in params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, group=dp_group)
            flat /= dp
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        opt.step()
        opt.zero_grad(set_to_none=True)
        took = (time.perf_counter() - start) * 1e3
        if world <= 8 or os.environ.get("PRISM_COORDINATOR"):
            loss = f", loss {sum(l.item() for l in losses) / len(losses):.4f}" if losses else ""
            print(f"torch_pipelining: rank {rank} stages {[s.stage_index for s in stages]} "
                  f"step {step}: {took:.2f} ms{loss}", flush=True)
    if args.gather_stages:
        held = [None] * world
        dist.all_gather_object(held, tuple(s.stage_index for s in stages))
        counts = {}
        for h in held:
            counts[h] = counts.get(h, 0) + 1
        if world <= 8 or os.environ.get("PRISM_COORDINATOR"):
            print(f"torch_pipelining: rank {rank} gathered the stages of {world} ranks: "
                  f"{dict(sorted(counts.items()))}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
