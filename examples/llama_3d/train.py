"""A small Llama trained with 3-D parallelism on CPU, the shape torchtitan
gives it: pipeline parallelism (torch.distributed.pipelining, Schedule1F1B
or ScheduleInterleaved1F1B) x FSDP2 (fully_shard over the dp dimension) x
tensor and sequence parallelism (DTensor, parallelize_module over the tp
dimension). An ordinary torch.distributed program, with nothing of PrismLLM
in it.

Run it as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). The
ranks form a (pp, dp, tp) device mesh, row-major: tp innermost, pipeline
outermost, as Megatron and PrismLLM's job layout order them.

The model: token embeddings, blocks of RMSNorm, attention with rotary
position embeddings and SwiGLU feed-forward, a final RMSNorm and the output
projection. Each pipeline rank holds one stage (--schedule 1f1b) or
--virtual of them round-robin (--schedule interleaved). Inside a stage, as
torchtitan's parallelize_llama does:
- tensor parallelism: the embeddings row-wise with the output sharded on
  the sequence; in each block the norms are SequenceParallel, the inputs
  of attention and feed-forward are all-gathered on the sequence
  (PrepareModuleInput), wq/wk/wv/w1/w3 column-wise, wo/w2 row-wise with the
  output reduce-scattered onto the sequence; the final norm
  SequenceParallel and the output projection column-wise, its logits
  all-gathered (Replicate). Every rank builds the same weights from its
  stage's seed and keeps its own shards (src_data_rank=None).
- FSDP2: fully_shard on each block and on the stage over the dp mesh,
  parameters kept unsharded between forward and backward
  (reshard_after_forward=False), as torchtitan does under pipelining;
  gradients are reduce-scattered once, after the last microbatch.
- pipelining: PipelineStage over the pp group, given its input's and
  output's shapes (input_args, output_args): the stage boundary carries
  the sequence-sharded hidden state, (micro-batch, seq/tp, dim).

In the CI, tests/cli/emulate_program_test.cc runs it as one real rank of the
64-rank job examples/jobs/llama-3d-64.yaml (pp 2 x dp 4 x tp 8);
docs/torch-backend.md ("Programs") gives the figures.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B,
                                          ScheduleInterleaved1F1B)
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                               RowwiseParallel, SequenceParallel,
                                               parallelize_module)


def rotary(seq, head_dim, theta=10000.0):
    """cos and sin of the rotary embedding, (seq, head_dim / 2) each."""
    freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), freqs)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    """x: (batch, seq, heads, head_dim), rotated pairwise."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, heads, seq):
        super().__init__()
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        cos, sin = rotary(seq, self.head_dim)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        b, t, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds heads / tp.
        q, k, v = (w(x).view(b, t, -1, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q, k = rotate(q, self.cos[:t], self.sin[:t]), rotate(k, self.cos[:t], self.sin[:t])
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        return self.wo(a.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.attention_norm = nn.RMSNorm(args.dim)
        self.attention = Attention(args.dim, args.heads, args.seq)
        self.ffn_norm = nn.RMSNorm(args.dim)
        self.feed_forward = FeedForward(args.dim, args.hidden)

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


class Stage(nn.Module):
    """Stage `index` of `count`: its slice of the blocks, the embeddings on
    the first, the final norm and the output projection on the last."""

    def __init__(self, args, index, count):
        super().__init__()
        self.first, self.last = index == 0, index == count - 1
        lo, hi = index * args.layers // count, (index + 1) * args.layers // count
        self.tok_embeddings = nn.Embedding(args.vocab, args.dim) if self.first else None
        self.layers = nn.ModuleList(Block(args) for _ in range(lo, hi))
        self.norm = nn.RMSNorm(args.dim) if self.last else None
        self.output = nn.Linear(args.dim, args.vocab, bias=False) if self.last else None

    def forward(self, x):
        if self.tok_embeddings is not None:
            x = self.tok_embeddings(x)
        for layer in self.layers:
            x = layer(x)
        if self.output is not None:
            x = self.output(self.norm(x))
        return x


def parallelize(stage, tp_mesh, dp_mesh):
    """torchtitan's tensor, sequence and data parallelism of one stage."""
    top = {}
    if stage.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(),
                                                output_layouts=Shard(1))
    if stage.output is not None:
        top["norm"] = SequenceParallel()
        top["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    if top:
        parallelize_module(stage, tp_mesh, top, src_data_rank=None)
    for block in stage.layers:
        parallelize_module(block, tp_mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),),
                                            desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
            "feed_forward.w3": ColwiseParallel(),
        }, src_data_rank=None)
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=False)
    fully_shard(stage, mesh=dp_mesh, reshard_after_forward=False)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--schedule", choices=["1f1b", "interleaved"], default="1f1b")
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--tp", type=int, default=8)
    p.add_argument("--virtual", type=int, default=2,
                   help="stages per pipeline rank with --schedule interleaved")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128, help="feed-forward width")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % (args.pp * args.tp):
        raise SystemExit(f"llama_3d: {world} ranks do not split into pp {args.pp} x tp {args.tp}")
    dp = world // (args.pp * args.tp)
    mesh = init_device_mesh("cpu", (args.pp, dp, args.tp), mesh_dim_names=("pp", "dp", "tp"))
    pp_rank = mesh["pp"].get_local_rank()
    virtual = args.virtual if args.schedule == "interleaved" else 1
    count = args.pp * virtual
    if args.layers < count or args.seq % args.tp or args.heads % args.tp:
        raise SystemExit(f"llama_3d: {args.layers} layers for {count} stages, or seq "
                         f"{args.seq} / heads {args.heads} not divisible by tp {args.tp}")

    mbs, device = args.micro_batch_size, torch.device("cpu")
    # The stage boundary: the hidden state, sharded on the sequence.
    hidden = torch.empty(mbs, args.seq // args.tp, args.dim, device="meta")
    stages, modules = [], []
    for v in range(virtual):
        index = pp_rank + v * args.pp
        torch.manual_seed(1234 + index)  # the same stage on every replica
        module = Stage(args, index, count)
        parallelize(module, mesh["tp"], mesh["dp"])
        inputs = (torch.empty(mbs, args.seq, dtype=torch.long, device="meta")
                  if index == 0 else hidden)
        outputs = (torch.empty(mbs, args.seq, args.vocab, device="meta")
                   if index == count - 1 else hidden)
        stages.append(PipelineStage(module, index, count, device, input_args=inputs,
                                    output_args=outputs, group=mesh["pp"].get_group()))
        modules.append(module)

    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, args.vocab), target.reshape(-1))

    if args.schedule == "interleaved":
        schedule = ScheduleInterleaved1F1B(stages, args.microbatches, loss_fn=loss_fn)
    else:
        schedule = Schedule1F1B(stages[0], args.microbatches, loss_fn=loss_fn)
    has_first = any(s.is_first for s in stages)
    has_last = any(s.is_last for s in stages)
    # foreach=False: one optimizer over DTensors of two meshes' layouts.
    opt = torch.optim.AdamW([prm for m in modules for prm in m.parameters()], lr=3e-4,
                            foreach=False)
    # Each data-parallel replica its own batches; its tp and pp ranks the same.
    data = torch.Generator().manual_seed(1000 + mesh["dp"].get_local_rank())
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
        opt.step()
        opt.zero_grad(set_to_none=True)
        took = (time.perf_counter() - start) * 1e3
        if world <= 8 or os.environ.get("PRISM_COORDINATOR"):
            loss = f", loss {sum(l.item() for l in losses) / len(losses):.4f}" if losses else ""
            print(f"llama_3d: rank {rank} stages {[s.stage_index for s in stages]} "
                  f"step {step}: {took:.2f} ms{loss}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
