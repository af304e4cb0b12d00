#!/usr/bin/env python3
"""Check (d) of scripts/gpu/check.sh: how long a stream held by a collective
takes to run again. N all-reduces of one bf16 element through PyTorch's
ProcessGroupNCCL, each between two CUDA events on the same stream, one at a
time (synchronized), so each interval is: the enqueue, the collective, and
the release of the stream until the next kernel (the event) runs. Under
`prism emulate` with the drop-in and a near-instant network the collective's
own emulated time is ~0, so the interval bounds the release latency from
above (coordinator round trip + cuStreamWaitValue32 release + event); alone
(world size 1, real NCCL) it gives the baseline. Prints `RELEASE {json}`:
p50/p99/max in microseconds.

Run on an H200 on 2026-11-27 (docs/gpu.md, Results). A drop-in-level
timestamp of the coordinator's completion would make it exact.
"""

import argparse
import json
import os
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    import torch
    import torch.distributed as dist
    if not torch.cuda.is_available():
        sys.exit("release_latency.py: no CUDA device")
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29534"))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    x = torch.ones(1, device="cuda", dtype=torch.bfloat16)
    us = []
    for i in range(args.warmup + args.count):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dist.all_reduce(x)
        b.record()
        b.synchronize()
        if i >= args.warmup:
            us.append(a.elapsed_time(b) * 1e3)
    us.sort()
    q = lambda f: us[min(len(us) - 1, int(f * len(us)))]
    print("RELEASE " + json.dumps({"world": dist.get_world_size(), "count": len(us),
                                   "p50_us": q(0.50), "p99_us": q(0.99), "max_us": us[-1]}),
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
