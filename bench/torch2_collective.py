"""The per-collective overhead of PrismLLM's c10d backend and what it does
to a real rank's compute (bench/torch2_overhead.sh runs it; docs/benchmarks.md,
"torch2_overhead.sh").

An ordinary torch.distributed program (init_process_group("gloo"), which
`prism emulate` turns into the prism backend), run as torchrun would. Two
phases, one after the other:
1. round trips: --warmup-calls, then --calls all_reduces of a 1-float
   tensor, each timed on its own (time.perf_counter around the blocking
   dist.all_reduce, so the wait is work.wait()'s);
2. compute: --blocks blocks of a fixed CPU loop (--matmuls products of two
   --size x --size float32 matrices), each timed alone, wall
   (perf_counter) and this thread's CPU (thread_time). With --overlap,
   an all_reduce is in flight during each block (async_op=True before it,
   wait() after it), so the backend's progress thread polls the
   coordinator while the block computes; without it, a blocking all_reduce
   runs between blocks and nothing is outstanding while one computes.
   With --spin, each all_reduce of this phase is waited for by spinning on
   work.is_completed() before work.wait(), so the core never idles between
   blocks: a block after a long wait then starts on a core as warm as
   one after none (on a VM, a block after a 120 ms sleep ran 20-30% slower,
   which hides the progress thread's own cost).

Prints one line, `torch2_collective: {json}`: world size, backend, the
round trips' p50/p90/p99/max in microseconds, and the blocks' median wall
and CPU in milliseconds.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist


def quantile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (k - lo)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--warmup-calls", type=int, default=200)
    p.add_argument("--blocks", type=int, default=40)
    p.add_argument("--warmup-blocks", type=int, default=3)
    p.add_argument("--matmuls", type=int, default=40)
    p.add_argument("--size", type=int, default=192)
    p.add_argument("--overlap", action="store_true")
    p.add_argument("--spin", action="store_true")
    args = p.parse_args()
    if args.calls < 1 or args.blocks < 1 or args.matmuls < 1 or args.size < 1:
        raise SystemExit("torch2_collective: --calls, --blocks, --matmuls and --size must be >= 1")

    dist.init_process_group("gloo")
    tiny = torch.ones(1)
    trips = []
    for i in range(args.warmup_calls + args.calls):
        start = time.perf_counter()
        dist.all_reduce(tiny)
        took = time.perf_counter() - start
        if i >= args.warmup_calls:
            trips.append(took * 1e6)

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(args.size, args.size, generator=gen)
    b = torch.randn(args.size, args.size, generator=gen)
    def finish(work):
        if args.spin:
            while not work.is_completed():
                pass
        work.wait()

    walls, cpus = [], []
    for i in range(args.warmup_blocks + args.blocks):
        work = dist.all_reduce(tiny, async_op=True) if args.overlap else None
        start, cpu = time.perf_counter(), time.thread_time()
        c = a
        for _ in range(args.matmuls):
            c = torch.mm(b, c)
            c.mul_(0.05)  # keep the values finite
        wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
        if work is not None:
            finish(work)
        elif args.spin:
            finish(dist.all_reduce(tiny, async_op=True))
        else:
            dist.all_reduce(tiny)
        if i >= args.warmup_blocks:
            walls.append(wall * 1e3)
            cpus.append(cpu * 1e3)

    result = {
        "world": dist.get_world_size(), "backend": str(dist.get_backend()),
        "overlap": args.overlap, "spin": args.spin, "calls": len(trips),
        "trip_us": {"p50": quantile(trips, 0.5), "p90": quantile(trips, 0.9),
                    "p99": quantile(trips, 0.99), "max": max(trips)},
        "blocks": len(walls), "block_ms": statistics.median(walls),
        "block_cpu_ms": statistics.median(cpus),
    }
    print("torch2_collective: " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
