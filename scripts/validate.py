#!/usr/bin/env python3
"""Compare `prism simulate` predictions with published training measurements.

For every job spec examples/validation/<id>.yaml, runs

    build/bin/prism simulate <id>.yaml --report <tmp>.json

reads iteration_time_s and tokens_per_s_per_gpu from the report, and compares
them with the row <id> of the calibration table (training_runs.csv: columns
id, model, gpus, step_time_s, tokens_per_s_per_gpu). Prints a markdown table
and the mean absolute error over the rows that ran; a row that fails shows
prism's error message in the table. Pure standard-library Python.

    scripts/validate.py                      # all rows
    scripts/validate.py --dry-run            # only match files to CSV rows
    scripts/validate.py --only NAR21 --prism-arg=--kernel-db=kernels.csv
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CSV_CANDIDATES = (
    os.path.join(REPO, "shared", "calibration", "training_runs.csv"),
    os.path.join(os.path.dirname(REPO), "shared", "calibration", "training_runs.csv"),
)


def find_csv(path):
    if path:
        return path
    for candidate in CSV_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    return CSV_CANDIDATES[-1]


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    missing = {"id", "model", "gpus", "step_time_s", "tokens_per_s_per_gpu"} - set(rows[0] if rows else {})
    if missing:
        raise ValueError("%s: missing columns %s" % (path, ", ".join(sorted(missing))))
    return {r["id"]: r for r in rows}


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def run_prism(prism, spec, extra_args, timeout_s):
    """(report dict, None) or (None, error message)."""
    fd, report = tempfile.mkstemp(prefix="prism_validate_", suffix=".json")
    os.close(fd)
    try:
        cmd = [prism, "simulate", spec, "--report", report] + list(extra_args)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=timeout_s)
        except FileNotFoundError:
            return None, "prism not found at %s (build it, or pass --prism)" % prism
        except subprocess.TimeoutExpired:
            return None, "timed out after %d s" % timeout_s
        if proc.returncode != 0:
            lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
            errors = [l for l in lines if l.startswith("error")]
            msg = (errors or lines or ["exit status %d" % proc.returncode])[-1]
            return None, msg.strip()
        try:
            with open(report) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            return None, "cannot read report: %s" % e
        for key in ("iteration_time_s", "tokens_per_s_per_gpu"):
            if number(data.get(key)) is None:
                return None, "report has no numeric %s" % key
        return data, None
    finally:
        if os.path.exists(report):
            os.unlink(report)


def error_pct(predicted, measured):
    if predicted is None or not measured:
        return None
    return 100.0 * (predicted - measured) / measured


def fmt(value, digits):
    return "" if value is None else "%.*f" % (digits, value)


def fmt_err(value):
    return "" if value is None else "%+.1f" % value


def pct(value):
    return "n/a" if value is None else "%.1f%%" % value


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def mean_abs(values):
    values = [abs(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None


def main(argv=None):
    p = argparse.ArgumentParser(description="Compare prism simulate with published training runs.")
    p.add_argument("--csv", help="calibration table (default: shared/calibration/training_runs.csv)")
    p.add_argument("--dir", default=os.path.join(REPO, "examples", "validation"),
                   help="directory of <id>.yaml job specs (default: examples/validation)")
    p.add_argument("--prism", default=os.path.join(REPO, "build", "bin", "prism"),
                   help="prism binary (default: build/bin/prism)")
    p.add_argument("--prism-arg", action="append", default=[],
                   help="extra argument for prism simulate (repeatable), e.g. --prism-arg=--kernel-db=FILE")
    p.add_argument("--only", help="only ids containing this text")
    p.add_argument("--timeout", type=int, default=600, help="seconds per simulation (default 600)")
    p.add_argument("--dry-run", action="store_true",
                   help="match job specs to CSV rows and list them; run nothing")
    args = p.parse_args(argv)

    csv_path = find_csv(args.csv)
    try:
        rows = read_rows(csv_path)
    except (OSError, ValueError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    try:
        specs = sorted(f for f in os.listdir(args.dir) if f.endswith(".yaml"))
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    ids = [f[:-len(".yaml")] for f in specs]
    if args.only:
        ids = [i for i in ids if args.only in i]
    # CSV order, then files without a row.
    ordered = [i for i in rows if i in ids] + [i for i in ids if i not in rows]
    no_spec = [i for i in rows if i not in ids and (not args.only or args.only in i)]

    if args.dry_run:
        print("| id | model | gpus | measured step s | measured tokens/s/GPU | job spec |")
        print("|---|---|---:|---:|---:|---|")
        for i in ordered:
            r = rows.get(i)
            spec = os.path.relpath(os.path.join(args.dir, i + ".yaml"), REPO)
            if r is None:
                print("| %s | | | | | %s (no CSV row) |" % (cell(i), spec))
            else:
                print("| %s | %s | %s | %s | %s | %s |" % (cell(i), cell(r["model"]), r["gpus"],
                                                          r["step_time_s"], r["tokens_per_s_per_gpu"], spec))
        print("\n%d job specs, %d CSV rows (%s)" % (len(ordered), len(rows), csv_path))
        for i in no_spec:
            print("no job spec for CSV row %s" % i)
        return 1 if no_spec or any(i not in rows for i in ordered) else 0

    print("| id | model | gpus | measured step s | predicted step s | error % "
          "| measured tokens/s/GPU | predicted | error % |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    step_errs, tok_errs, failures = [], [], 0
    for i in ordered:
        r = rows.get(i)
        if r is None:
            print("| %s | | | | error: no row in %s | | | | |" % (cell(i), os.path.basename(csv_path)))
            failures += 1
            continue
        measured_step = number(r["step_time_s"])
        measured_tok = number(r["tokens_per_s_per_gpu"])
        print("%s ..." % i, file=sys.stderr, flush=True)
        report, err = run_prism(args.prism, os.path.join(args.dir, i + ".yaml"), args.prism_arg,
                                args.timeout)
        head = "| %s | %s | %s | %s |" % (cell(i), cell(r["model"]), r["gpus"], r["step_time_s"])
        if err is not None:
            failures += 1
            print("%s %s | | %s | | |" % (head, cell(err), r["tokens_per_s_per_gpu"]))
            continue
        step = number(report["iteration_time_s"])
        tok = number(report["tokens_per_s_per_gpu"])
        e_step, e_tok = error_pct(step, measured_step), error_pct(tok, measured_tok)
        step_errs.append(e_step)
        tok_errs.append(e_tok)
        print("%s %s | %s | %s | %s | %s |" % (head, fmt(step, 3), fmt_err(e_step),
                                              r["tokens_per_s_per_gpu"], fmt(tok, 0), fmt_err(e_tok)))

    ran = len(ordered) - failures
    m_step, m_tok = mean_abs(step_errs), mean_abs(tok_errs)
    print()
    print("Mean absolute error over %d of %d rows: step time %s, tokens/s/GPU %s." % (
        ran, len(ordered), pct(m_step), pct(m_tok)))
    for i in no_spec:
        print("No job spec for CSV row %s." % i)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
