#!/usr/bin/env python3
"""The GPU's kernel time in torch.profiler traces, for the perturbation
checks (c) and (p) of scripts/gpu/check.sh:

    trace_kernels.py --alone TRACE --emulated TRACE [--steps N]

Each TRACE is a Kineto JSON trace (examples/cuda_gpt/train.py --profile,
the last N steps, 2 by default). Sums the durations of the device's events
(`kernel`, `gpu_memcpy`, `gpu_memset`) of each and prints one line
`KERNELS {json}`: per trace the event count, the kernel time per step in
ms, the span, and percent_apart = emulated / alone - 1, in percent. The
kernels' own time leaves out the host's gaps and the waits on held
streams, so it is the GPU work the emulation must not perturb. Seen on an
H200 on 2026-11-27: 900 kernels, 27.524 ms alone and 27.571 ms captured
over two steps (+0.17%).
"""

import argparse
import json
import sys

DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def summary(path, steps):
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit("trace_kernels.py: %s: %s" % (path, e))
    ev = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE]
    if not ev:
        sys.exit("trace_kernels.py: %s: no device events (a CPU run, or no CUDA activity)" % path)
    start = min(e["ts"] for e in ev)
    end = max(e["ts"] + e["dur"] for e in ev)
    busy_us = sum(e["dur"] for e in ev)
    return {"trace": path, "events": len(ev), "kernel_ms_per_step": busy_us / 1e3 / steps,
            "span_ms": (end - start) / 1e3}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--alone", required=True)
    p.add_argument("--emulated", required=True)
    p.add_argument("--steps", type=int, default=2, help="steps each trace holds (2)")
    a = p.parse_args()
    alone, emul = summary(a.alone, a.steps), summary(a.emulated, a.steps)
    out = {"alone": alone, "emulated": emul,
           "percent_apart": 100.0 * (emul["kernel_ms_per_step"] / alone["kernel_ms_per_step"] - 1)}
    out["within_1_percent"] = abs(out["percent_apart"]) <= 1.0
    print("KERNELS " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
