#!/usr/bin/env python3
"""Compare `prism simulate` predictions with published training measurements.

For every job spec examples/validation/<id>.yaml, runs

    build/bin/prism simulate <id>.yaml --report <tmp>.json

reads iteration_time_s and tokens_per_s_per_gpu from the report, and compares
them with the row <id> of the measurement tables: the shared calibration table
(shared/calibration/training_runs.csv) and the repository's own
examples/validation/h100_runs.csv. Both have the columns id, model, gpus,
step_time_s, tokens_per_s_per_gpu (and hardware, precision for the splits).

Prints a markdown table of every row, then the mean and max absolute
step-time error split by GPU type, model size (<20B, 20-100B, >100B
parameters, as prism counts them), precision (bf16, fp8) and scale (GPUs
<=64, 65-512, >512). A row whose simulation runs out of memory (prism exits
4) shows as OOM and is counted, not averaged; a row that fails shows prism's
error. Rows that publish peak memory (column memory_gib: the peak of
torch.cuda.max_memory_reserved() on rank 0, in GiB) get a second table
against the reserved peak of the role holding rank 0 (the report's
roles[].peak_reserved_bytes; NCCL and the CUDA context are outside PyTorch's
count). Weak-scaling series (rows whose ids differ only in a trailing
"-<GPU count>" and that do the same work per GPU) get a third table: the
measured and predicted step growth from the smallest to the largest scale.
Pure standard-library Python.

    scripts/validate.py                      # all rows
    scripts/validate.py --dry-run            # only match files to CSV rows
    scripts/validate.py --only NAR21 --prism-arg=--kernel-db=kernels.csv
    scripts/validate.py --csv A.csv --csv B.csv   # other tables instead
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_CSV_CANDIDATES = (
    os.path.join(REPO, "shared", "calibration", "training_runs.csv"),
    os.path.join(os.path.dirname(REPO), "shared", "calibration", "training_runs.csv"),
)
OWN_CSV = os.path.join(REPO, "examples", "validation", "h100_runs.csv")
REQUIRED = ("id", "model", "gpus", "step_time_s", "tokens_per_s_per_gpu")
EXIT_OUT_OF_MEMORY = 4  # prism simulate: a rank ran out of memory (report still written)


def default_csvs():
    """The shared table (if this checkout has one beside it) and ours."""
    paths = []
    env = os.environ.get("PRISM_TRAINING_RUNS_CSV")
    if env:
        paths.append(env)
    else:
        found = [c for c in SHARED_CSV_CANDIDATES if os.path.exists(c)]
        paths.extend(found[:1])
        if not found:
            print("note: shared/calibration/training_runs.csv not found (set PRISM_TRAINING_RUNS_CSV "
                  "or pass --csv); using %s only" % os.path.relpath(OWN_CSV, REPO), file=sys.stderr)
    paths.append(OWN_CSV)
    return paths


def read_rows(paths):
    """{id: row} over all tables, each row with its table's path under '_csv'."""
    rows = {}
    for path in paths:
        with open(path, newline="") as f:
            table = list(csv.DictReader(f))
        missing = set(REQUIRED) - set(table[0] if table else {})
        if missing:
            raise ValueError("%s: missing columns %s" % (path, ", ".join(sorted(missing))))
        for line, r in enumerate(table, start=2):
            if r["id"] in rows:
                raise ValueError("%s:%d: id %s already in %s" % (path, line, r["id"], rows[r["id"]]["_csv"]))
            r["_csv"] = path
            rows[r["id"]] = r
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def run_prism(prism, spec, extra_args, timeout_s):
    """(report dict, None, oom) or (None, error message, False)."""
    fd, report = tempfile.mkstemp(prefix="prism_validate_", suffix=".json")
    os.close(fd)
    try:
        cmd = [prism, "simulate", spec, "--report", report] + list(extra_args)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=timeout_s)
        except FileNotFoundError:
            return None, "prism not found at %s (build it, or pass --prism)" % prism, False
        except subprocess.TimeoutExpired:
            return None, "timed out after %d s" % timeout_s, False
        oom = proc.returncode == EXIT_OUT_OF_MEMORY
        if proc.returncode != 0 and not oom:
            lines = [l for l in (proc.stderr + proc.stdout).splitlines() if l.strip()]
            errors = [l for l in lines if l.startswith("error")]
            msg = (errors or lines or ["exit status %d" % proc.returncode])[-1]
            return None, msg.strip(), False
        try:
            with open(report) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            return None, "cannot read report: %s" % e, False
        if not oom:
            for key in ("iteration_time_s", "tokens_per_s_per_gpu"):
                if number(data.get(key)) is None:
                    return None, "report has no numeric %s" % key, False
        return data, None, oom
    finally:
        if os.path.exists(report):
            os.unlink(report)


# --- the splits -------------------------------------------------------------

GPU_NAMES = ("GB200", "B200", "H200", "H100", "A100", "V100")


def gpu_type(row, report):
    for text in ((report or {}).get("gpu", ""), row.get("hardware", "")):
        for name in GPU_NAMES:
            if name in str(text).upper():
                return name
    return "unknown"


def precision(row):
    text = row.get("precision", "").upper()
    if "FP8" in text:
        return "fp8"
    if "BF16" in text or "FP16" in text or "16-BIT" in text:
        return "bf16"
    return "unknown"


def params_from_name(model):
    """Parameters named in the model column ('GPT 1.7B', '1T', 'Mixtral 8x7B' = 56B)."""
    m = re.search(r"(\d+)x(\d+(?:\.\d+)?)B", model)
    if m:
        return float(m.group(1)) * float(m.group(2)) * 1e9
    m = re.search(r"(\d+(?:\.\d+)?)\s*([BT])\b", model)
    if m:
        return float(m.group(1)) * (1e9 if m.group(2) == "B" else 1e12)
    return None


def size_bucket(row, report):
    params = number((report or {}).get("parameters")) or params_from_name(row.get("model", ""))
    if params is None:
        return "unknown"
    if params < 20e9:
        return "<20B"
    return "20-100B" if params <= 100e9 else ">100B"


def scale_bucket(row):
    gpus = number(row.get("gpus"))
    if gpus is None:
        return "unknown"
    if gpus <= 64:
        return "<=64 GPUs"
    return "65-512 GPUs" if gpus <= 512 else ">512 GPUs"


SPLITS = (
    ("GPU", lambda r: r["gpu"], ("A100", "H100")),
    ("model size", lambda r: r["size"], ("<20B", "20-100B", ">100B")),
    ("precision", lambda r: r["precision"], ("bf16", "fp8")),
    ("scale", lambda r: r["scale"], ("<=64 GPUs", "65-512 GPUs", ">512 GPUs")),
)


def split_table(results):
    """Markdown lines: over all rows and within each GPU type, for each split and group:
    rows, mean/max |step error|, predicted OOM, failed."""
    out = ["| rows of | split | group | rows | simulated | mean abs step error | max abs step error "
           "| predicted OOM | failed |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    gpus = sorted({r["gpu"] for r in results})
    for scope in ["all"] + gpus:
        scoped = [r for r in results if scope == "all" or r["gpu"] == scope]
        for name, key, order in SPLITS:
            if scope != "all" and name == "GPU":
                continue
            groups = sorted({key(r) for r in scoped},
                            key=lambda g: (order.index(g) if g in order else len(order), g))
            for g in groups:
                members = [r for r in scoped if key(r) == g]
                errs = [abs(r["step_err"]) for r in members if r["step_err"] is not None]
                out.append("| %s | %s | %s | %d | %d | %s | %s | %d | %d |" % (
                    scope, name, g, len(members), len(errs), pct(mean(errs)),
                    pct(max(errs) if errs else None),
                    sum(1 for r in members if r["status"] == "oom"),
                    sum(1 for r in members if r["status"] == "failed")))
    return out


# --- formatting ---------------------------------------------------------------

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


def mean(values):
    return sum(values) / len(values) if values else None


def mean_abs(values):
    return mean([abs(v) for v in values if v is not None])


def rank0_reserved_gib(report):
    """PyTorch's reserved peak on rank 0: that of the role rank 0 represents (its lowest rank)."""
    for role in (report or {}).get("roles") or []:
        if role.get("representative_rank") == 0:
            peak = number(role.get("peak_reserved_bytes"))
            return None if peak is None else peak / 2.0**30
    return None


def memory_table(results):
    """Lines comparing the published peak memory with the prediction, or [] if none is published."""
    rows = [r for r in results if r.get("memory") is not None]
    if not rows:
        return []
    lines = ["| id | measured peak reserved GiB (rank 0) | predicted | error % |", "|---|---:|---:|---:|"]
    errors = []
    for r in rows:
        measured, predicted = r["memory"]
        if predicted is None:
            lines.append("| %s | %s | %s | |" % (cell(r["id"]), fmt(measured, 2),
                                                  "n/a (%s)" % r["status"]))
            continue
        err = error_pct(predicted, measured)
        errors.append(err)
        lines.append("| %s | %s | %s | %s |" % (cell(r["id"]), fmt(measured, 2), fmt(predicted, 2),
                                               fmt_err(err)))
    lines.append("")
    lines.append("Peak memory over %d of %d rows that publish it: mean absolute error %s, max %s." % (
        len(errors), len(rows), pct(mean_abs(errors)),
        pct(max(abs(e) for e in errors) if errors else None)))
    return lines


def weak_scaling_table(results):
    """Lines comparing measured and predicted step growth along weak-scaling series, or [] if none.

    A series: rows whose id ends in "-<their GPU count>" and is otherwise the same, that
    simulated, and whose per-GPU work (measured tokens/s/GPU x step) is within 1% of that
    of the series' smallest row. Growth is from its smallest to its largest GPU count."""
    series = {}
    for r in results:
        m = re.match(r"^(.*)-(\d+)$", r.get("id") or "")
        if r["status"] != "ok" or not m or int(m.group(2)) != r.get("gpus"):
            continue
        series.setdefault(m.group(1), []).append(r)
    lines = []
    for name in sorted(series):
        members = sorted(series[name], key=lambda r: r["gpus"])
        work = members[0]["work"]
        members = [r for r in members if abs(r["work"] / work - 1) <= 0.01]
        if len(members) < 2:
            continue
        first, last = members[0], members[-1]
        measured = error_pct(last["measured_step"], first["measured_step"])
        predicted = error_pct(last["predicted_step"], first["predicted_step"])
        lines.append("| %s | %d -> %d | %s | %s |" % (cell(name), first["gpus"], last["gpus"],
                                                     fmt_err(measured), fmt_err(predicted)))
    if not lines:
        return []
    return (["Weak scaling (the same work per GPU at more GPUs): step time growth from the "
             "smallest to the largest scale of each series.", "",
             "| series | GPUs | measured growth % | predicted growth % |", "|---|---|---:|---:|"]
            + lines)


def oom_text(report):
    """'OOM (need X of Y GiB)': the peak device memory the run asked for, of the capacity."""
    memory = (report or {}).get("memory") or {}
    peak, cap = number(memory.get("peak_device_bytes")), number(memory.get("capacity_bytes"))
    if peak is None or cap is None:
        return "OOM"
    return "OOM (%.2f of %.2f GiB)" % (peak / 2.0**30, cap / 2.0**30)


def main(argv=None):
    p = argparse.ArgumentParser(description="Compare prism simulate with published training runs.")
    p.add_argument("--csv", action="append",
                   help="measurement table, repeatable (default: shared/calibration/training_runs.csv "
                        "and examples/validation/h100_runs.csv)")
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

    csv_paths = args.csv or default_csvs()
    try:
        rows = read_rows(csv_paths)
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
    tables = ", ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in csv_paths)

    if args.dry_run:
        print("| id | model | gpus | GPU | precision | measured step s | measured tokens/s/GPU | job spec |")
        print("|---|---|---:|---|---|---:|---:|---|")
        for i in ordered:
            r = rows.get(i)
            spec = os.path.relpath(os.path.join(args.dir, i + ".yaml"), REPO)
            if r is None:
                print("| %s | | | | | | | %s (no CSV row) |" % (cell(i), spec))
            else:
                print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    cell(i), cell(r["model"]), r["gpus"], gpu_type(r, None), precision(r),
                    r["step_time_s"], r["tokens_per_s_per_gpu"], spec))
        print("\n%d job specs, %d CSV rows (%s)" % (len(ordered), len(rows), tables))
        for i in no_spec:
            print("no job spec for CSV row %s" % i)
        return 1 if no_spec or any(i not in rows for i in ordered) else 0

    print("| id | model | GPU | precision | gpus | measured step s | predicted step s | error % "
          "| measured tokens/s/GPU | predicted | error % |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    results = []
    for i in ordered:
        r = rows.get(i)
        if r is None:
            print("| %s | | | | | | error: no row in %s | | | | |" % (cell(i), tables))
            results.append({"status": "failed", "step_err": None, "tok_err": None, "gpu": "unknown",
                            "size": "unknown", "precision": "unknown", "scale": "unknown"})
            continue
        measured_step = number(r["step_time_s"])
        measured_tok = number(r["tokens_per_s_per_gpu"])
        print("%s ..." % i, file=sys.stderr, flush=True)
        report, err, oom = run_prism(args.prism, os.path.join(args.dir, i + ".yaml"), args.prism_arg,
                                     args.timeout)
        res = {"gpu": gpu_type(r, report), "size": size_bucket(r, report), "precision": precision(r),
               "scale": scale_bucket(r), "step_err": None, "tok_err": None, "id": i}
        measured_memory = number(r.get("memory_gib") or "")
        if measured_memory is not None:
            complete = err is None and not oom
            res["memory"] = (measured_memory, rank0_reserved_gib(report) if complete else None)
        head = "| %s | %s | %s | %s | %s | %s |" % (cell(i), cell(r["model"]), res["gpu"], res["precision"],
                                                    r["gpus"], r["step_time_s"])
        if err is not None:
            res["status"] = "failed"
            print("%s %s | | %s | | |" % (head, cell(err), r["tokens_per_s_per_gpu"]))
        elif oom:
            res["status"] = "oom"
            print("%s %s | | %s | | |" % (head, oom_text(report), r["tokens_per_s_per_gpu"]))
        else:
            res["status"] = "ok"
            step = number(report["iteration_time_s"])
            tok = number(report["tokens_per_s_per_gpu"])
            res["step_err"], res["tok_err"] = error_pct(step, measured_step), error_pct(tok, measured_tok)
            res.update(gpus=int(number(r["gpus"]) or 0), measured_step=measured_step,
                       predicted_step=step, work=measured_tok * measured_step)
            print("%s %s | %s | %s | %s | %s |" % (head, fmt(step, 3), fmt_err(res["step_err"]),
                                                  r["tokens_per_s_per_gpu"], fmt(tok, 0), fmt_err(res["tok_err"])))
        results.append(res)

    ran = [r for r in results if r["status"] == "ok"]
    ooms = sum(1 for r in results if r["status"] == "oom")
    failures = sum(1 for r in results if r["status"] == "failed")
    m_step = mean_abs([r["step_err"] for r in ran])
    m_tok = mean_abs([r["tok_err"] for r in ran])
    print()
    print("Mean absolute error over %d of %d rows: step time %s, tokens/s/GPU %s; "
          "%d predicted out of memory, %d failed." % (len(ran), len(results), pct(m_step), pct(m_tok),
                                                     ooms, failures))
    print()
    for line in split_table(results):
        print(line)
    for table in (memory_table(results), weak_scaling_table(results)):
        if table:
            print()
            for line in table:
                print(line)
    for i in no_spec:
        print("No job spec for CSV row %s." % i)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
