"""Kernel times as data/kernels.csv measures them against the same kernels
run without a pause for many seconds, as a training step keeps the GPU busy
(issue 24: "sustained clocks" among the in-situ effects isolated
microbenchmarks miss).

For each GEMM shape: the GPU idles IDLE seconds, then
- burst: scripts/measure_kernels.py's own Timer (5 warm-up calls, the median
  of 20 calls queued back to back between CUDA events): how the kernel
  database is measured;
- sustained: the same call queued back to back for SECONDS seconds, timed in
  batches of 20 between CUDA events; each batch's time per call is kept
  with the moment it ended.
Meanwhile `nvidia-smi` samples the SM clock, the power draw, the enforced
power limit and the temperature every 250 ms (no clock figures where it is
missing). Per shape the output gives the burst time, the sustained time per
call over the first second and the last half of the run (medians), their
ratio to the burst, the achieved TFLOP/s, and the SM clock and power over
the same windows; and, where the kernel database (--db, data/kernels.csv)
has the shape's signature for this GPU (--gpu), the sustained time over
the database's: the GPU's sustained slowdown (docs/compute.md, "Sustained
clocks"). The default shapes are in the database for H100 and H200.

    python3 scripts/gpu/sustained_clocks.py [--seconds 20] [--idle 3] [--out FILE.json]
        [--shape bf16:8192x8192x7168 ...] [--db data/kernels.csv] [--gpu H100-SXM5-80GB]

A shape is DTYPE:MxNxK (bf16, or fp8 for e4m3 through torch._scaled_mm).
Prints one line per shape and writes the figures as JSON (atomically).
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# In data/kernels.csv for both Hopper GPUs (measured 2026-11-23).
DEFAULT_SHAPES = ["bf16:8192x8192x7168", "bf16:14336x4096x8192", "fp8:8192x8192x7168",
                  "fp8:8192x8192x14336"]
# torch's device names -> the database's GPU names.
GPU_NAMES = {"H100 80GB HBM3": "H100-SXM5-80GB", "H100": "H100-SXM5-80GB", "H200": "H200-SXM-141GB",
             "A100-SXM4-80GB": "A100-SXM4-80GB", "A100-SXM4-40GB": "A100-SXM4-40GB",
             "B200": "B200-SXM-180GB"}
BATCH = 20  # calls between a pair of events in the sustained loop


def db_name(device_name):
    """The database's name for torch's device name ("NVIDIA H200"), or None."""
    name = device_name.replace("NVIDIA ", "").strip()
    return GPU_NAMES.get(name) or next((v for k, v in GPU_NAMES.items() if name.startswith(k)), None)


def read_db(path, gpu):
    """signature -> microseconds of the rows of `gpu` in a kernel database."""
    import csv
    with open(path, newline="") as f:
        return {r["signature"].strip(): float(r["us"]) for r in csv.DictReader(
            line for line in f if line.strip() and not line.lstrip().startswith("#"))
            if r.get("gpu", "").strip() == gpu}


def signature(shape):
    dtype, m, n, k = shape
    return f"gemm {dtype} m={m} n={n} k={k}"


def _timer_class():
    """measure_kernels.Timer, from scripts/ (the repository) or ../scripts
    (the bundle, where this file sits in gpu/)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.join(here, ".."), os.path.join(here, "..", "scripts")):
        if os.path.exists(os.path.join(d, "measure_kernels.py")):
            sys.path.insert(0, os.path.abspath(d))
            import measure_kernels
            return measure_kernels.Timer
    sys.exit("sustained_clocks.py: error: measure_kernels.py not found beside scripts/gpu")


def parse_shape(text):
    try:
        dtype, dims = text.split(":")
        m, n, k = (int(x) for x in dims.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape '{text}' is not DTYPE:MxNxK (e.g. bf16:8192x8192x8192)")
    if dtype not in ("bf16", "fp8") or min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"shape '{text}': dtype bf16 or fp8, dimensions >= 1")
    return dtype, m, n, k


class Sampler:
    """nvidia-smi sampling in the background: (seconds since start, SM MHz,
    power W, power limit W, temperature C) rows, timed by nvidia-smi's own
    timestamps (local time, as datetime.now())."""

    FIELDS = "timestamp,clocks.sm,power.draw,enforced.power.limit,temperature.gpu"

    def __init__(self):
        self.file = tempfile.TemporaryFile(mode="w+")
        self.t0 = datetime.datetime.now()
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={self.FIELDS}", "--format=csv,noheader,nounits",
                 "-lms", "250", "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]],
                stdout=self.file, stderr=subprocess.DEVNULL)
        except OSError:
            self.proc = None

    def stop(self):
        if self.proc is None:
            self.file.close()
            return []
        self.proc.terminate()
        self.proc.wait()
        self.file.seek(0)
        rows = []
        for line in self.file:
            parts = [p.strip() for p in line.split(",")]
            try:
                at = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                rows.append(((at - self.t0).total_seconds(), *(float(p) for p in parts[1:5])))
            except (ValueError, IndexError):
                continue  # "[N/A]" or a partial line
        self.file.close()
        return rows


def window(rows, lo, hi, col):
    xs = [r[col] for r in rows if lo <= r[0] < hi]
    return statistics.median(xs) if xs else None


def run_shape(torch, Timer, shape, seconds, idle):
    dtype, m, n, k = shape
    dev = torch.device("cuda")
    if dtype == "bf16":
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        fn = lambda: torch.matmul(a, b)
    else:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev, dtype=torch.float32)
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    fn()
    torch.cuda.synchronize()
    time.sleep(idle)
    sampler = Sampler()
    t0 = time.monotonic() - (datetime.datetime.now() - sampler.t0).total_seconds()
    burst_us = Timer(torch, dev, 5, 20, False, 30).median_us(fn)
    t_burst = time.monotonic() - t0
    series = []  # (seconds since the sustained loop began, us per call)
    start_loop = time.monotonic()
    while time.monotonic() - start_loop < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(BATCH):
            fn()
        e1.record()
        e1.synchronize()
        series.append((time.monotonic() - start_loop, e0.elapsed_time(e1) * 1e3 / BATCH))
    samples = sampler.stop()
    loop_at = start_loop - t0  # the loop's start on the sampler's time line
    first = [us for t, us in series if t <= 1.0]
    last = [us for t, us in series if t >= seconds / 2]
    flops = 2.0 * m * n * k
    out = {
        "shape": f"{dtype}:{m}x{n}x{k}",
        "burst_us": round(burst_us, 2),
        "burst_tflops": round(flops / burst_us / 1e6, 1),
        "sustained_first_s_us": round(statistics.median(first), 2),
        "sustained_last_half_us": round(statistics.median(last), 2),
        "sustained_last_half_tflops": round(flops / statistics.median(last) / 1e6, 1),
        "last_half_over_burst": round(statistics.median(last) / burst_us, 4),
        "first_s_over_burst": round(statistics.median(first) / burst_us, 4),
        "batches": len(series),
        "seconds": round(series[-1][0], 1),
    }
    if samples:
        for name, lo, hi in (("burst", 0, t_burst + 0.25), ("first_s", loop_at, loop_at + 1),
                             ("last_half", loop_at + seconds / 2, loop_at + seconds + 1)):
            out[f"{name}_sm_mhz"] = window(samples, lo, hi, 1)
            out[f"{name}_power_w"] = window(samples, lo, hi, 2)
        out["power_limit_w"] = samples[-1][3]
        out["temperature_c_end"] = samples[-1][4]
        out["samples"] = len(samples)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0, help="sustained run per shape (20)")
    p.add_argument("--idle", type=float, default=3.0, help="idle seconds before each shape (3)")
    p.add_argument("--shape", type=parse_shape, action="append", help=f"(default {DEFAULT_SHAPES})")
    p.add_argument("--out", help="write the figures here as JSON")
    here = os.path.dirname(os.path.abspath(__file__))
    default_db = next((d for d in (os.path.join(here, "..", "..", "data", "kernels.csv"),
                                   os.path.join(here, "..", "data", "kernels.csv")) if os.path.exists(d)), None)
    p.add_argument("--db", default=default_db, help="the kernel database (default: data/kernels.csv)")
    p.add_argument("--gpu", help="the database's name of this GPU (default: from torch's device name)")
    args = p.parse_args(argv)
    if args.seconds < 2:
        p.error("--seconds must be at least 2")
    shapes = args.shape or [parse_shape(s) for s in DEFAULT_SHAPES]
    import torch
    if not torch.cuda.is_available():
        sys.exit("sustained_clocks.py: error: no CUDA device (this check needs a GPU)")
    Timer = _timer_class()
    device = torch.cuda.get_device_name(0)
    gpu = args.gpu or db_name(device)
    db = read_db(args.db, gpu) if args.db and gpu else {}
    result = {"gpu": device, "db_gpu": gpu, "torch": torch.__version__, "shapes": []}
    for shape in shapes:
        if shape[0] == "fp8" and not hasattr(torch, "_scaled_mm"):
            print(f"{shape}: skipped, no torch._scaled_mm", flush=True)
            continue
        r = run_shape(torch, Timer, shape, args.seconds, args.idle)
        if signature(shape) in db:
            r["db_us"] = db[signature(shape)]
            r["last_half_over_db"] = round(r["sustained_last_half_us"] / r["db_us"], 4)
        result["shapes"].append(r)
        print(f"{r['shape']}: burst {r['burst_us']:.1f} us ({r['burst_tflops']} TFLOP/s), sustained "
              f"first 1 s {r['sustained_first_s_us']:.1f} us, last half {r['sustained_last_half_us']:.1f} us "
              f"({r['sustained_last_half_tflops']} TFLOP/s): x{r['last_half_over_burst']:.4f} of burst; "
              f"SM MHz burst/last half {r.get('burst_sm_mhz')}/{r.get('last_half_sm_mhz')}, "
              f"power W {r.get('burst_power_w')}/{r.get('last_half_power_w')} of {r.get('power_limit_w')}; "
              + (f"database {r['db_us']} us: sustained x{r['last_half_over_db']:.4f} of it" if "db_us" in r
                 else f"not in the database for {gpu}"), flush=True)
    for dtype in ("bf16", "fp8"):
        xs = [r["last_half_over_db"] for r in result["shapes"]
              if "last_half_over_db" in r and r["shape"].startswith(dtype)]
        if xs:
            result[f"{dtype}_sustained_over_db_median"] = round(statistics.median(xs), 4)
            print(f"{dtype}: sustained over the database, median x{statistics.median(xs):.4f} "
                  f"over {len(xs)} shapes", flush=True)
    if args.out:
        d = os.path.dirname(os.path.abspath(args.out))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".sustained.")
        with os.fdopen(fd, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
