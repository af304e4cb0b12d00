#!/usr/bin/env python3
"""Check (f) of scripts/gpu/check.sh: what a capture on the GPU made of the
real rank's kernels. Reads (a) ddp's outputs:

    capture_figures.py --slices DIR --graph FILE --report FILE --program-out FILE

--slices: `prism emulate --slices` captures (slice-rank<N>.json); their
`compute` events named `kernels` are what the drop-in reported: each held
stream's GPU time from its previous release to the next collective (CUDA
events). --program-out: the step's output, with one `GPU_STATS {json}` line
per run of the program (the first is the captured run, the last the
emulated one). --report: emulate's JSON report (replay prediction vs
emulated iteration). Prints one line `CAPTURE {json}`:
- kernel_compute_events, kernel_compute_ms: the capture's kernel time;
- captured_run_gpu_ms: the captured run's own CUDA-event time over all its
  steps; kernel_share: kernel_compute_ms over it (the part of the steps'
  GPU time that became the graph's compute; the rest is the held waits and
  the work before the first collective of a step);
- predicted_iteration_s, emulated_iteration_s, percent_apart; and
  emulated_steady_iteration_s (the median of the iterations after the
  first, which carries the warm-up), steady_percent_apart.
"""

import argparse
import glob
import json
import os
import sys


def gpu_stats(path):
    runs = []
    with open(path, errors="replace") as f:
        for line in f:
            i = line.find("GPU_STATS {")
            if i >= 0:
                try:
                    runs.append(json.loads(line[i + len("GPU_STATS "):]))
                except ValueError:
                    pass
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--slices", required=True)
    p.add_argument("--graph", required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--program-out", required=True)
    a = p.parse_args()
    out = {}
    files = glob.glob(os.path.join(a.slices, "slice-rank*.json"))
    if not files:
        sys.exit("capture_figures.py: no slice-rank*.json in %s" % a.slices)
    runs = gpu_stats(a.program_out)
    # The program's first GPU_STATS is the captured representative's (a role
    # check's second capture, and the emulation, come after it): its slice.
    files.sort(key=lambda f: int(os.path.basename(f)[len("slice-rank"):-len(".json")] or 0))
    mine = [f for f in files if runs and os.path.basename(f) == "slice-rank%s.json" % runs[0].get("rank")]
    files = mine + [f for f in files if f not in mine]
    events = json.load(open(files[0]))["events"]
    kernels = [e for e in events if e.get("type") == "compute" and e.get("name", "kernels") == "kernels"]
    out["slice"] = os.path.basename(files[0])
    out["events"] = len(events)
    out["ops"] = sum(1 for e in events if e.get("type") == "op")
    out["kernel_compute_events"] = len(kernels)
    out["kernel_compute_ms"] = sum(e["duration"] for e in kernels) / 1e6
    if runs:
        out["captured_run_gpu_ms"] = sum(runs[0]["step_ms"])
        out["captured_run_steps"] = len(runs[0]["step_ms"])
        if out["captured_run_gpu_ms"] > 0:
            out["kernel_share"] = out["kernel_compute_ms"] / out["captured_run_gpu_ms"]
    out["graph_bytes"] = os.path.getsize(a.graph) if os.path.exists(a.graph) else 0
    if os.path.exists(a.report):
        r = json.load(open(a.report))
        pred, emul = r.get("predicted_iteration_time_s"), r.get("iteration_time_s")
        out["predicted_iteration_s"], out["emulated_iteration_s"] = pred, emul
        if pred and emul:
            out["percent_apart"] = 100.0 * (emul / pred - 1)
        # The first iteration carries the warm-up (DDP's bucket rebuild, the
        # first connections): the median of the others is the steady state.
        its = (r.get("real_ranks") or [{}])[0].get("iteration_times_s") or []
        if pred and len(its) > 1:
            rest = sorted(its[1:])
            out["emulated_steady_iteration_s"] = rest[len(rest) // 2]
            out["steady_percent_apart"] = 100.0 * (out["emulated_steady_iteration_s"] / pred - 1)
    print("CAPTURE " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
