"""The GPU check's (i): a kernel's time in a training step against the same
kernel called alone, on one GPU, for the signatures of one profiled step.

    insitu_figures.py --insitu A.csv --events B.csv --alone C.csv [--table T.txt]

A.csv: `prism calibrate kineto` of a profiled training step (each
signature's median kernel time in the step). B.csv: scripts/measure_kernels.py
on A's signatures (CUDA events around each call alone, as data/kernels.csv's
rows are measured). C.csv: `prism calibrate kineto` of B's own profile (the
kernels' device time alone). Prints one line `INSITU {json}`: per kind (gemm,
attn, mem) and in all, the number of signatures and the medians of
step/events and step/alone, and the kernel-time-weighted ratios; --table
writes one line per signature.
"""

import argparse
import csv
import json
import os
import statistics
import sys


def read(path):
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {r["signature"]: float(r["us"]) for r in csv.DictReader(f)}


def kind_of(sig):
    head = sig.split(" ", 1)[0]
    return "attn" if head.startswith("attn") else head


def summary(rows):
    out = {"signatures": len(rows)}
    for name, col in (("step_over_events", 2), ("step_over_alone", 3)):
        pairs = [(r[1], r[col]) for r in rows if r[col]]
        if pairs:
            out[name + "_median"] = round(statistics.median(a / b for a, b in pairs), 4)
            out[name + "_weighted"] = round(sum(a for a, _ in pairs) / sum(b for _, b in pairs), 4)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--insitu", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--alone", required=True)
    p.add_argument("--table")
    a = p.parse_args(argv)
    step, events, alone = read(a.insitu), read(a.events), read(a.alone)
    rows = [(s, step[s], events.get(s), alone.get(s)) for s in sorted(step)]
    rows = [r for r in rows if r[2] or r[3]]
    out = {"all": summary(rows)}
    for kind in sorted({kind_of(r[0]) for r in rows}):
        out[kind] = summary([r for r in rows if kind_of(r[0]) == kind])
    if a.table:
        with open(a.table, "w") as f:
            f.write("signature\tstep_us\tevents_us\talone_us\n")
            for s, st, ev, al in rows:
                f.write("%s\t%.2f\t%s\t%s\n" % (s, st, "%.2f" % ev if ev else "-",
                                                 "%.2f" % al if al else "-"))
    print("INSITU " + json.dumps(out, sort_keys=True), flush=True)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
