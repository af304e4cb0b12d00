#!/usr/bin/env python3
"""Fit the GEMM efficiency curve's constants to the measured-kernel database.

Reads the GEMM rows of data/kernels.csv (or --db FILE), compares each measured
time with the GEMM curve of src/compute/kernel_model.cc (the database itself
ignored), and fits, per GPU type with GEMM rows and per input type (bf16, fp8),
the curve's two free constants: the efficiency cap E (gemm_max_efficiency /
gemm_fp8_max_efficiency, a fraction of the dense peak in (0, 1]) and the k
half-point k_half (gemm_k_half / gemm_fp8_k_half, >= 0). The other constants
(SMs, peaks, tile, HBM efficiency, launch overhead) are the GPU's, not fitted.
The shipped Hopper constants are the H100 fit; the H200 shares them (its own
fit is printed for comparison). docs/compute.md gives the figures.

    scripts/fit_gemm_curve.py              # gap with the shipped constants, and the fit
    scripts/fit_gemm_curve.py --gap-only   # only the gap with the shipped constants
    scripts/fit_gemm_curve.py --gpu H100-SXM5-80GB --constants bf16=0.80,128 --constants fp8=0.71,128

The objective is the median of |ln(measured / modelled)| over the rows of one
GPU and type (robust to the few tiny kernels whose measured time is host
dispatch, not the GPU): a grid over E in 0.50..1.00 (step 0.01) and k_half in
0..2048 (step 16); ties go to the smaller sum of squared log ratios. The
printed gap is measured/modelled: median, 10th/90th percentiles, min/max and
the median by k range.

The curve here mirrors KernelModel::gemm_s (src/compute/kernel_model.cc) and
the GPU constants mirror src/compute/gpu_spec.cc; tests/compute's
KernelModelFitTest holds the C++ curve to the database, so a change to either
that is not refitted fails there. Pure standard-library Python.
"""

import argparse
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DB = os.path.join(REPO, "data", "kernels.csv")

# Mirror of src/compute/gpu_spec.cc for the GPU types with measured GEMMs:
# SMs, dense peaks (FLOP/s), HBM bytes/s and efficiency, launch overhead (s),
# the large tile, and the shipped curve constants per type (E, k_half): Hopper's,
# fitted to the H100 rows, for both.
GPUS = {
    "H100-SXM5-80GB": dict(sms=132, bf16=989.4e12, fp8=1978.9e12, hbm=3350e9, hbm_eff=0.87,
                           launch=2.0e-6, tile=(128, 256), stream_k=0.93,
                           shipped={"bf16": (0.74, 208), "fp8": (0.68, 528)}),
    "H200-SXM-141GB": dict(sms=132, bf16=989.4e12, fp8=1978.9e12, hbm=4800e9, hbm_eff=0.87,
                           launch=2.0e-6, tile=(128, 256), stream_k=0.93,
                           shipped={"bf16": (0.74, 208), "fp8": (0.68, 528)}),
}
# Tile candidates (kGemmTiles): the large tile, and one half as wide at 0.9 of its rate;
# the large one may also run as stream-K (gemm_stream_k_rate, Hopper): its work spread
# evenly over the SMs at stream_k of its rate, no partial last wave (at least one wave).
TILES = ((1, 1, 1.0, True), (1, 2, 0.9, False))
IN_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
OUT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 2}  # FP8 GEMMs write bf16
K_RANGES = ((0, 1024), (1024, 2048), (2048, 4096), (4096, 8192), (8192, None))
E_GRID = [e / 100 for e in range(50, 101)]
K_HALF_GRID = list(range(0, 2049, 16))


def fail(msg):
    print("error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def read_gemms(path):
    """{gpu: {dtype: [(m, n, k, batch, us)]}} from the database's GEMM rows."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    rows, header = {}, None
    for no, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [x.strip() for x in line.split(",")]
        if header is None:
            header = {name: i for i, name in enumerate(fields)}
            if not all(c in header for c in ("gpu", "signature", "us")):
                fail("%s:%d: header needs gpu, signature and us" % (path, no))
            continue
        if len(fields) != len(header):
            fail("%s:%d: %d fields, header has %d" % (path, no, len(fields), len(header)))
        words = fields[header["signature"]].split()
        if not words or words[0] != "gemm":
            continue
        try:
            dims = dict(w.split("=", 1) for w in words[2:])
            if "acc" in dims:
                continue  # the curve is the plain GEMM's; an accumulating one reads C too
            shape = tuple(int(dims.get(x, "1" if x == "batch" else "")) for x in ("m", "n", "k", "batch"))
            us = float(fields[header["us"]])
        except ValueError:
            fail("%s:%d: malformed GEMM row '%s'" % (path, no, line))
        rows.setdefault(fields[header["gpu"]], {}).setdefault(words[1], []).append(shape + (us,))
    return rows


def row_terms(g, dtype, m, n, k, batch):
    """(c, mem_s): the curve is max(c (k + k_half) / E, mem_s) + launch.

    The wave count of each tile candidate does not depend on E or k_half, so
    the faster tile is the same for every (E, k_half): c is the best
    candidate's seconds per unit of (k + k_half) / E.
    """
    peak = g["fp8"] if dtype == "fp8" else g["bf16"] / (2 if dtype == "fp32" else 1)
    sm_peak = peak / g["sms"]
    c = math.inf
    if m > 0 and n > 0 and k > 0 and batch > 0:
        for m_div, n_div, rate, stream_k in TILES:
            tm, tn = g["tile"][0] / m_div, g["tile"][1] / n_div
            tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
            c = min(c, math.ceil(tiles / g["sms"]) * 2 * tm * tn / (sm_peak * rate))
            if stream_k and g.get("stream_k"):
                c = min(c, max(tiles / g["sms"], 1.0) * 2 * tm * tn / (sm_peak * g["stream_k"]))
    else:
        c = 0.0
    mem_bytes = batch * (IN_BYTES[dtype] * (m * k + k * n) + OUT_BYTES[dtype] * m * n)
    return c, mem_bytes / (g["hbm_eff"] * g["hbm"])


def modelled_us(g, terms, k, e, k_half):
    c, mem_s = terms
    return (max(c * (k + k_half) / e, mem_s) + g["launch"]) * 1e6


def log_ratios(g, rows, terms, e, k_half):
    return [math.log(us / modelled_us(g, t, r[2], e, k_half)) for r, t in zip(rows, terms)
            for us in (r[4],)]


def median(xs):
    s = sorted(xs)
    h = len(s) // 2
    return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2


def quantile(sorted_xs, p):
    i = p * (len(sorted_xs) - 1)
    lo = math.floor(i)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (i - lo)


def describe(rows, lr):
    """One summary line and the median by k range, of measured/modelled."""
    s = sorted(math.exp(x) for x in lr)
    out = ["  measured/modelled over %d rows: median %.3f, p10 %.3f, p90 %.3f, min %.3f, max %.3f, "
           "median |ln| %.3f" % (len(s), median(s), quantile(s, 0.1), quantile(s, 0.9), s[0], s[-1],
                                 median(abs(x) for x in lr))]
    parts = []
    for lo, hi in K_RANGES:
        sel = [math.exp(x) for r, x in zip(rows, lr) if r[2] >= lo and (hi is None or r[2] < hi)]
        if sel:
            parts.append("%s: %.3f (%d)" % ("k >= %d" % lo if hi is None else "%d <= k < %d" % (lo, hi),
                                             median(sel), len(sel)))
    out.append("  median by k: " + ", ".join(parts))
    return "\n".join(out)


def fit(g, rows, terms):
    best = None
    for e in E_GRID:
        for kh in K_HALF_GRID:
            lr = log_ratios(g, rows, terms, e, kh)
            key = (round(median(abs(x) for x in lr), 9), sum(x * x for x in lr))
            if best is None or key < best[0]:
                best = (key, e, kh)
    return best[1], best[2]


def parse_constants(specs):
    out = {}
    for spec in specs:
        try:
            dtype, rest = spec.split("=", 1)
            e, kh = rest.split(",")
            out[dtype] = (float(e), float(kh))
        except ValueError:
            fail("--constants '%s': expected TYPE=E,K_HALF (e.g. bf16=0.80,128)" % spec)
        if not 0 < out[dtype][0] <= 1 or out[dtype][1] < 0:
            fail("--constants '%s': E must be in (0, 1] and K_HALF >= 0" % spec)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=DEFAULT_DB, help="kernel database CSV (default: data/kernels.csv)")
    ap.add_argument("--gpu", action="append", help="only this GPU type (repeatable)")
    ap.add_argument("--gap-only", action="store_true", help="print the gap, do not fit")
    ap.add_argument("--constants", action="append", default=[], metavar="TYPE=E,K_HALF",
                    help="curve constants to compare instead of the shipped ones (repeatable)")
    args = ap.parse_args(argv)
    override = parse_constants(args.constants)
    db = read_gemms(args.db)
    gpus = args.gpu or [g for g in GPUS if g in db]
    for name in gpus:
        if name not in GPUS:
            fail("--gpu %s: no curve constants for it here (known: %s)" % (name, ", ".join(GPUS)))
        if name not in db:
            fail("--gpu %s: no GEMM rows in %s" % (name, args.db))
    for name in gpus:
        g = GPUS[name]
        for dtype in sorted(db[name]):
            if dtype not in g["shipped"]:
                continue
            rows = db[name][dtype]
            terms = [row_terms(g, dtype, *r[:4]) for r in rows]
            e0, kh0 = override.get(dtype, g["shipped"][dtype])
            print("%s %s: E=%.2f k_half=%g (%s)" % (name, dtype, e0, kh0,
                                                      "given" if dtype in override else "shipped"))
            print(describe(rows, log_ratios(g, rows, terms, e0, kh0)))
            if args.gap_only:
                continue
            e, kh = fit(g, rows, terms)
            print("%s %s: fitted E=%.2f k_half=%d" % (name, dtype, e, kh))
            print(describe(rows, log_ratios(g, rows, terms, e, kh)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
