"""A small GPT trained in bf16 on one CUDA GPU with PyTorch's own NCCL process
groups: DDP, FSDP2 (fully_shard) or DTensor tensor parallelism. An ordinary
torch.distributed program, with nothing of PrismLLM in it; the GPU check
(scripts/gpu/check.sh, docs/gpu.md) runs it as one real rank of a 1,024-rank
job through the NCCL drop-in:

    prism emulate examples/jobs/cuda-gpt-1024.yaml --real-ranks 5 -- \
        env LD_PRELOAD=$PWD/lib/libnccl.so.2 PRISM_NCCL_DROPIN=1 \
        python3 examples/cuda_gpt/train.py --parallel ddp

Run it as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); with
no RANK it runs alone (world size 1, a local store). Each step: forward over
random tokens, the loss, backward, AdamW. CUDA events time each step's GPU
work; at the end one line `GPU_STATS {json}` gives the per-step times in ms
(the first --warmup steps left out), which scripts/gpu/check.sh reads.

--device cpu (gloo) is for checking the program without a GPU, and is how
the CI runs it as one real rank of 64 on PrismLLM's c10d backend:
--parallel fsdp (examples/jobs/fsdp-gpt-64.yaml) and --parallel tp
--sequence-parallel (examples/jobs/tp-sp-gpt-64.yaml), in
tests/cli/emulate_program_test.cc; docs/torch-backend.md ("Programs") gives
the figures. The CUDA path
ran on an H200 on 2026-11-27 (docs/gpu.md, Results): ddp and fsdp to the
end under the emulation; tp's last fix (AdamW without foreach) not yet.
"""

import argparse
import json
import math
import os
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
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, _ = x.shape
        # -1 for the width: under tensor parallelism each rank holds heads/tp.
        h = self.ln1(x)
        q, k, v = (y.view(b, t, -1, self.head_dim).transpose(1, 2)
                   for y in (self.q(h), self.k(h), self.v(h)))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    @property
    def head_dim(self):
        return self.ln1.normalized_shape[0] // self.heads


class GPT(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def parallelize(model, args, device, world):
    """Wraps the model for --parallel; returns it."""
    if args.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                   bucket_cap_mb=args.bucket_mb)
    from torch.distributed.device_mesh import init_device_mesh
    if args.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        return fully_shard(model)
    # tp: a 2-D mesh (dp, tp); Megatron-style column/row split of each block,
    # the data-parallel gradients all-reduced by hand after backward. Every
    # rank builds the same weights (seed 0), so each keeps its own shard
    # (src_data_rank=None) instead of DTensor's scatter and broadcast from tp
    # rank 0: rooted point-to-point set-up that a graph built from one
    # captured rank cannot mirror, and whose data virtual peers never send.
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   PrepareModuleOutput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    tp = min(args.tp, world)
    mesh = init_device_mesh(device.type, (world // tp, tp), mesh_dim_names=("dp", "tp"))
    if args.sequence_parallel:
        # Sequence parallelism inside each block: the residual stream and the
        # LayerNorms hold seq/tp tokens (Shard(1)); each column-parallel
        # linear all-gathers the sequence first, each row-parallel one
        # reduce-scatters onto it; the block's output is all-gathered again.
        plan = {
            "": PrepareModuleInput(input_layouts=(Replicate(),),
                                   desired_input_layouts=(Shard(1),)),
            "ln1": SequenceParallel(), "ln2": SequenceParallel(),
            "q": ColwiseParallel(input_layouts=Shard(1)),
            "k": ColwiseParallel(input_layouts=Shard(1)),
            "v": ColwiseParallel(input_layouts=Shard(1)),
            "proj": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
            "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1), use_local_output=False)}
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], plan, src_data_rank=None)
            parallelize_module(block, mesh["tp"], PrepareModuleOutput(
                output_layouts=(Shard(1),), desired_output_layouts=(Replicate(),)))
    else:
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], src_data_rank=None, parallelize_plan={
                "q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                "proj": RowwiseParallel(), "fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    model.dp_group = mesh["dp"].get_group()
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parallel", choices=["ddp", "fsdp", "tp"], default="ddp")
    p.add_argument("--device", default="cuda", help="cuda (NCCL) or cpu (gloo, for testing)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2, help="steps left out of GPU_STATS")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tp", type=int, default=8, help="tensor-parallel size for --parallel tp")
    p.add_argument("--sequence-parallel", action="store_true",
                   help="--parallel tp with sequence parallelism (SequenceParallel LayerNorms)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--profile", metavar="FILE",
                   help="profile the last two steps with torch.profiler (CPU and CUDA) and write "
                        "the Kineto trace to FILE (for `prism import kineto`); %%p in FILE becomes "
                        "the process id")
    args = p.parse_args()

    if "RANK" not in os.environ:  # alone: world size 1 with a local store
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29533"))
    cuda = args.device.startswith("cuda")
    if cuda:
        if not torch.cuda.is_available():
            raise SystemExit("train.py: --device cuda but torch.cuda.is_available() is False")
        torch.cuda.set_device(0)  # one GPU per host: every real rank uses it
        device = torch.device("cuda", 0)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend="nccl" if cuda else "gloo", init_method="env://",
                            device_id=device if cuda else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    dtype = torch.bfloat16 if cuda else torch.float32
    model = GPT(args.vocab, args.dim, args.layers, args.heads, args.seq).to(device=device,
                                                                            dtype=dtype)
    model = parallelize(model, args, device, world)
    # foreach needs one tensor type per list: tp mixes DTensors (the blocks)
    # and plain tensors (embeddings, final norm, head), which foreach refuses.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=cuda and args.parallel != "tp")
    gen = torch.Generator(device=device).manual_seed(rank)

    step_ms, wall_ms = [], []
    prof = None
    for step in range(args.steps):
        if args.profile and step == max(0, args.steps - 2):
            acts = [torch.profiler.ProfilerActivity.CPU]
            if cuda:
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            prof = torch.profiler.profile(activities=acts, record_shapes=True, profile_memory=True)
            prof.__enter__()
        idx = torch.randint(0, args.vocab, (args.batch, args.seq), device=device, generator=gen)
        wall = time.perf_counter()
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        logits = model(idx)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), idx.view(-1))
        loss.backward()
        if args.parallel == "tp" and world > 1:
            for prm in model.parameters():
                if prm.grad is not None:
                    g = prm.grad.to_local() if hasattr(prm.grad, "to_local") else prm.grad
                    dist.all_reduce(g, group=model.dp_group)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            end.record()
            end.synchronize()
            ms = begin.elapsed_time(end)
        else:
            ms = (time.perf_counter() - wall) * 1e3
        wall_ms.append((time.perf_counter() - wall) * 1e3)
        step_ms.append(ms)
        if rank == 0 or world <= 8 or os.environ.get("PRISM_COORDINATOR"):
            print(f"step {step} loss {loss.item():.4f} gpu {ms:.2f} ms", flush=True)
    if prof is not None:
        prof.__exit__(None, None, None)
        path = args.profile.replace("%p", str(os.getpid()))
        prof.export_chrome_trace(path + ".tmp")
        os.replace(path + ".tmp", path)
    kept = step_ms[args.warmup:] or step_ms
    stats = {
        "parallel": args.parallel, "rank": rank, "world": world, "device": str(device),
        "pid": os.getpid(),
        "steps": args.steps, "step_ms": step_ms, "wall_ms": wall_ms,
        "median_step_ms": statistics.median(kept), "mean_step_ms": statistics.fmean(kept),
        "max_memory_reserved": torch.cuda.max_memory_reserved() if cuda else 0,
        "max_memory_allocated": torch.cuda.max_memory_allocated() if cuda else 0,
        "torch": torch.__version__,
    }
    if cuda:
        free, total = torch.cuda.mem_get_info()
        stats.update(device_used_bytes=total - free, device_total_bytes=total,
                     gpu=torch.cuda.get_device_name(0))
    print("GPU_STATS " + json.dumps(stats), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
