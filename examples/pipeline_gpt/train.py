"""A small GPT trained with pipeline parallelism (and optional data
parallelism) on CPU: an ordinary torch.distributed program, with nothing of
PrismLLM in it.

Run it as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); ranks
are laid out in Megatron order: stage = rank // dp, data-parallel index =
rank % dp, so pipeline neighbours are rank - dp and rank + dp.

    bench/slices_fidelity_real.sh 3          # 2 ranks, pp 2, all real

Each step is GPipe: every stage runs the forward pass of each microbatch,
receiving its input from the previous stage and sending its output to the
next (blocking dist.send / dist.recv of a (micro-batch, seq, dim) float32
tensor); the last stage adds the final LayerNorm, the head and the loss. Then
the backward pass of each microbatch in the same order, gradients of the
stage inputs flowing back the same way. With dp > 1 each stage all-reduces
its gradients over its data-parallel group (one flattened bucket), then every
stage takes an AdamW step.

Each step's time is wall-clock; `cpu` is the CPU time of the main thread
(where torch computes, with one thread) in the step, as this machine's kernel
counts it. On a VM whose host at times takes a core away, the kernel counts
the lost time as run, so a step's cpu rises with it: a stage's cpu is a
measure of how fast its core was, not only of its work.
"""

import argparse
import math
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


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
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        attn = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Stage(nn.Module):
    """One pipeline stage of a GPT: the embeddings on the first stage, a slice
    of the blocks, and the final LayerNorm and head on the last."""

    def __init__(self, args, stage, pp):
        super().__init__()
        self.first, self.last = stage == 0, stage == pp - 1
        lo, hi = stage * args.layers // pp, (stage + 1) * args.layers // pp
        if self.first:
            self.tok = nn.Embedding(args.vocab, args.dim)
            self.pos = nn.Embedding(args.seq, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(lo, hi))
        if self.last:
            self.ln = nn.LayerNorm(args.dim)
            self.head = nn.Linear(args.dim, args.vocab, bias=False)

    def forward(self, x):
        if self.first:  # x holds token ids
            x = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)) if self.last else x


def train_step(args, model, opt, tokens, prev_rank, next_rank, dp_group, dp):
    """One GPipe step over the microbatches of `tokens`; returns the loss on
    the last stage (None elsewhere)."""
    shape = (args.micro_batch_size, args.seq, args.dim)
    inputs, outputs, total = [], [], 0.0
    for mb in tokens.split(args.micro_batch_size):
        if prev_rank is None:
            x = mb[:, :-1]
        else:
            x = torch.empty(shape)
            dist.recv(x, src=prev_rank)
            x.requires_grad_()
        y = model(x)
        if next_rank is None:
            y = F.cross_entropy(y.reshape(-1, args.vocab), mb[:, 1:].reshape(-1)) / args.microbatches
            total += y.item()
        else:
            dist.send(y.detach(), dst=next_rank)
        inputs.append(x)
        outputs.append(y)

    opt.zero_grad(set_to_none=True)
    for x, y in zip(inputs, outputs):
        if next_rank is None:
            y.backward()
        else:
            grad = torch.empty(shape)
            dist.recv(grad, src=next_rank)
            y.backward(grad)
        if prev_rank is not None:
            dist.send(x.grad, dst=prev_rank)

    if dp_group is not None:  # one flattened bucket per stage, averaged
        grads = [p.grad for p in model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=dp_group)
        flat /= dp
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
    opt.step()
    return total if next_rank is None else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1, help="first steps, not timed")
    p.add_argument("--pp", type=int, default=2, help="pipeline stages")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--micro-batch-size", type=int, default=1)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--verbose", action="store_true", help="print one line per step")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % args.pp or args.layers < args.pp:
        raise SystemExit(f"pipeline_gpt: {world} ranks and {args.layers} layers "
                         f"do not split into {args.pp} stages")
    dp = world // args.pp
    stage, dp_index = rank // dp, rank % dp
    dp_group = None
    if dp > 1:  # every rank creates every group, in the same order
        for s in range(args.pp):
            g = dist.new_group(list(range(s * dp, (s + 1) * dp)))
            if s == stage:
                dp_group = g
    prev_rank = rank - dp if stage > 0 else None
    next_rank = rank + dp if stage < args.pp - 1 else None

    torch.manual_seed(1234 + stage)  # the same slice on every replica of a stage
    model = Stage(args, stage, args.pp)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    # Each pipeline its own batches; every stage of it draws the same tokens.
    data = torch.Generator().manual_seed(1000 + dp_index)
    batch = args.microbatches * args.micro_batch_size

    times, cpus = [], []
    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (batch, args.seq + 1), generator=data)
        start, cpu_start = time.perf_counter(), time.thread_time()
        loss = train_step(args, model, opt, tokens, prev_rank, next_rank, dp_group, dp)
        took = (time.perf_counter() - start) * 1e3
        cpu = (time.thread_time() - cpu_start) * 1e3
        if step >= args.warmup:
            times.append(took)
            cpus.append(cpu)
        if args.verbose:
            extra = f", loss {loss:.4f}" if loss is not None else ""
            print(f"pipeline_gpt: rank {rank} stage {stage} step {step}: {took:.3f} ms, "
                  f"cpu {cpu:.3f} ms{extra}", flush=True)

    def median(xs):
        return statistics.median(xs) if xs else float("nan")

    mean = statistics.mean(times) if times else float("nan")
    print(f"pipeline_gpt: rank {rank} stage {stage}: {len(times)} steps, "
          f"mean step {mean:.3f} ms, median step {median(times):.3f} ms, "
          f"median cpu {median(cpus):.3f} ms", flush=True)
    if hasattr(dist, "destroy_process_group"):
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
