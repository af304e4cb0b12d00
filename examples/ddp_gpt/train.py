"""A small GPT trained with PyTorch DDP on CPU: an ordinary torch.distributed
program, with nothing of PrismLLM in it.

Run it as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or as
one real rank of a large emulated job:

    prism emulate examples/jobs/ddp-gpt-64.yaml --real-ranks 0 -- \
        .venv/bin/python examples/ddp_gpt/train.py

Each step: a forward pass over a batch of random tokens, the loss, the
backward pass (DDP all-reduces the gradients bucket by bucket while the
backward pass goes on), and an AdamW step.
"""

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


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


class GPT(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--bucket-mb", type=float, default=0.5, help="DDP's bucket_cap_mb")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial model on every rank
    model = GPT(args.vocab, args.dim, args.layers, args.heads, args.seq)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"gpt: {params / 1e6:.2f} M parameters, {world} ranks, {args.steps} steps", flush=True)

    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(args.steps):
        start = time.perf_counter()
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=data)
        logits = ddp(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0:
            took = (time.perf_counter() - start) * 1e3
            print(f"step {step}: loss {loss.item():.4f}, {took:.1f} ms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
