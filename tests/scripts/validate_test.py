#!/usr/bin/env python3
"""Tests of scripts/validate.py (docs/validation.md): the real job specs match
the measurement tables one to one, and, against a stand-in prism and tiny
tables, the per-row table, the OOM and failure rows, and the split figures."""

import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "validate.py")
OWN_CSV = os.path.join(REPO, "examples", "validation", "h100_runs.csv")
VALIDATION_DIR = os.path.join(REPO, "examples", "validation")

# A stand-in for `prism simulate SPEC --report FILE`: the spec's first line
# says what to do: "ok STEP TOKENS PARAMS GPU", "oom PARAMS GPU" or "fail".
FAKE_PRISM = r'''#!/usr/bin/env python3
import json, sys
spec, report = sys.argv[2], sys.argv[sys.argv.index("--report") + 1]
words = open(spec).readline().split()
if words[0] == "fail":
    print("error: %s:1: something is wrong" % spec, file=sys.stderr)
    sys.exit(1)
if words[0] == "ok":
    data = {"iteration_time_s": float(words[1]), "tokens_per_s_per_gpu": float(words[2]),
            "parameters": float(words[3]), "gpu": words[4]}
    if len(words) > 5:  # rank 0's role and its reserved peak, GiB
        data["roles"] = [{"name": "stage1", "representative_rank": 8, "peak_reserved_bytes": 1},
                         {"name": "stage0", "representative_rank": 0,
                          "peak_reserved_bytes": float(words[5]) * 2**30}]
    code = 0
else:
    data = {"outcome": "out_of_memory", "parameters": float(words[1]), "gpu": words[2],
            "memory": {"peak_device_bytes": 81 * 2**30, "capacity_bytes": 80 * 2**30}}
    code = 4
json.dump(data, open(report, "w"))
sys.exit(code)
'''

COLUMNS = ["id", "model", "hardware", "precision", "gpus", "step_time_s", "tokens_per_s_per_gpu"]


def run(args, env=None):
    p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, timeout=120,
                       env=env)
    return p.returncode, p.stdout, p.stderr


class RealRowsTest(unittest.TestCase):
    def test_every_own_row_has_a_job_and_every_job_a_row(self):
        with open(OWN_CSV, newline="") as f:
            own = [r["id"] for r in csv.DictReader(f)]
        self.assertEqual(len(own), len(set(own)))
        jobs = {f[:-5] for f in os.listdir(VALIDATION_DIR) if f.endswith(".yaml")}
        for i in own:
            self.assertIn(i, jobs, "h100_runs.csv row without examples/validation/%s.yaml" % i)
        # The other job files belong to the shared calibration table (outside
        # the repository); with it present the dry run must match all of them.
        shared = os.environ.get("PRISM_TRAINING_RUNS_CSV") or next(
            (c for c in (os.path.join(REPO, "shared", "calibration", "training_runs.csv"),
                         os.path.join(os.path.dirname(REPO), "shared", "calibration",
                                      "training_runs.csv")) if os.path.exists(c)), None)
        if shared is None:
            self.skipTest("shared/calibration/training_runs.csv not found")
        rc, out, err = run(["--dry-run", "--csv", shared, "--csv", OWN_CSV])
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("no CSV row", out)
        self.assertNotIn("no job spec", out)
        self.assertIn("%d job specs, %d CSV rows" % (len(jobs), len(jobs)), out)

    def test_own_rows_state_their_source(self):
        with open(OWN_CSV, newline="") as f:
            for r in csv.DictReader(f):
                with self.subTest(id=r["id"]):
                    self.assertTrue(r["source_url"].startswith("https://"), r["source_url"])
                    self.assertTrue(r["release"])
                    # Step time and throughput agree: the step the published
                    # throughput gives (NeMo, Megatron-Bridge tables), or the
                    # published step's throughput rounded to a token (DGXC).
                    samples = float(r["gbs"]) * float(r["seq"]) / float(r["gpus"])
                    tokens = float(r["tokens_per_s_per_gpu"])
                    step = float(r["step_time_s"])
                    self.assertTrue(abs(step - samples / tokens) < 5e-4 or
                                    abs(tokens - samples / step) <= 0.5,
                                    "%s s against %s tokens/s/GPU" % (step, tokens))


class FakePrismTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.prism = os.path.join(d, "prism")
        with open(self.prism, "w") as f:
            f.write(FAKE_PRISM)
        os.chmod(self.prism, 0o755)
        self.jobs = os.path.join(d, "jobs")
        os.mkdir(self.jobs)

    def tearDown(self):
        self.tmp.cleanup()

    def table(self, name, rows):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            w.writerows(rows)
        return path

    def job(self, name, first_line):
        with open(os.path.join(self.jobs, name + ".yaml"), "w") as f:
            f.write(first_line + "\n")

    def validate(self, tables, extra=()):
        args = ["--prism", self.prism, "--dir", self.jobs] + list(extra)
        for t in tables:
            args += ["--csv", t]
        return run(args)

    def test_table_oom_failure_and_splits(self):
        a = self.table("a.csv", [
            ["small", "GPT 1.7B", "A100 DGX", "FP16/BF16 mixed", "32", "10", "100"],
            ["mid", "Llama 70B", "H100", "BF16", "64", "10", "100"],
        ])
        b = self.table("b.csv", [
            ["big", "GPT-3 175B", "H100 (DGX-H100)", "FP8 (delayed)", "1024", "10", "100"],
            ["tight", "Nemotron 340B", "H100", "FP8 (delayed)", "128", "10", "100"],
            ["broken", "Llama 8B", "H100", "FP8", "8", "10", "100"],
        ])
        self.job("small", "ok 9 111.1111 1.7e9 A100-SXM4-80GB")      # -10%
        self.job("mid", "ok 12 83.3333 70e9 H100-SXM5-80GB")         # +20%
        self.job("big", "ok 10.5 95.2381 175e9 H100-SXM5-80GB")      # +5%
        self.job("tight", "oom 341e9 H100-SXM5-80GB")
        self.job("broken", "fail")
        rc, out, err = self.validate([a, b])
        self.assertEqual(rc, 1, out + err)  # a row failed
        lines = out.splitlines()
        row = lambda i: next(l for l in lines if l.startswith("| %s |" % i))
        self.assertIn("| 9.000 | -10.0 |", row("small"))
        self.assertIn("| A100 | bf16 |", row("small"))
        self.assertIn("| 12.000 | +20.0 |", row("mid"))
        self.assertIn("OOM (81.00 of 80.00 GiB)", row("tight"))
        self.assertIn("error: ", row("broken"))
        self.assertIn("something is wrong", row("broken"))
        self.assertIn("Mean absolute error over 3 of 5 rows: step time 11.7%", out)
        self.assertIn("1 predicted out of memory, 1 failed.", out)
        # Splits: rows, simulated, mean, max, OOM, failed.
        self.assertIn("| all | GPU | A100 | 1 | 1 | 10.0% | 10.0% | 0 | 0 |", lines)
        self.assertIn("| all | GPU | H100 | 4 | 2 | 12.5% | 20.0% | 1 | 1 |", lines)
        self.assertIn("| all | model size | <20B | 2 | 1 | 10.0% | 10.0% | 0 | 1 |", lines)
        self.assertIn("| all | model size | 20-100B | 1 | 1 | 20.0% | 20.0% | 0 | 0 |", lines)
        self.assertIn("| all | model size | >100B | 2 | 1 | 5.0% | 5.0% | 1 | 0 |", lines)
        self.assertIn("| all | precision | bf16 | 2 | 2 | 15.0% | 20.0% | 0 | 0 |", lines)
        self.assertIn("| all | precision | fp8 | 3 | 1 | 5.0% | 5.0% | 1 | 1 |", lines)
        self.assertIn("| all | scale | <=64 GPUs | 3 | 2 | 15.0% | 20.0% | 0 | 1 |", lines)
        self.assertIn("| all | scale | 65-512 GPUs | 1 | 0 | n/a | n/a | 1 | 0 |", lines)
        self.assertIn("| all | scale | >512 GPUs | 1 | 1 | 5.0% | 5.0% | 0 | 0 |", lines)
        self.assertIn("| H100 | precision | fp8 | 3 | 1 | 5.0% | 5.0% | 1 | 1 |", lines)
        self.assertFalse(any(l.startswith("| A100 | GPU |") for l in lines))

    def test_published_peak_memory_against_rank_zeros_reserved_peak(self):
        path = os.path.join(self.tmp.name, "m.csv")
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS + ["memory_gib"])
            w.writerow(["over", "Nemotron-4 15B", "H100", "BF16", "64", "10", "100", "60"])
            w.writerow(["under", "Nemotron-4 15B", "H100", "BF16", "64", "10", "100", "50"])
            w.writerow(["nomem", "Nemotron-4 15B", "H100", "BF16", "64", "10", "100", ""])
            w.writerow(["tight", "Nemotron-4 15B", "H100", "BF16", "64", "10", "100", "70"])
        self.job("over", "ok 10 100 15e9 H100-SXM5-80GB 63")   # +5%
        self.job("under", "ok 10 100 15e9 H100-SXM5-80GB 45")  # -10%
        self.job("nomem", "ok 10 100 15e9 H100-SXM5-80GB 40")
        self.job("tight", "oom 15e9 H100-SXM5-80GB")
        rc, out, err = self.validate([path])
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertIn("| id | measured peak reserved GiB (rank 0) | predicted | error % |", lines)
        self.assertIn("| over | 60.00 | 63.00 | +5.0 |", lines)
        self.assertIn("| under | 50.00 | 45.00 | -10.0 |", lines)
        self.assertIn("| tight | 70.00 | n/a (oom) | |", lines)
        self.assertFalse(any(l.startswith("| nomem | 40") for l in lines))
        self.assertIn("Peak memory over 2 of 3 rows that publish it: mean absolute error 7.5%, "
                      "max 10.0%.", lines)

    def test_weak_scaling_series_by_trailing_gpu_count(self):
        a = self.table("a.csv", [
            # A series: 16 -> 2048 GPUs, 1000 tokens per GPU per step in each row.
            ["S-16", "Nemotron-4 15B", "H100", "BF16", "16", "10", "100"],
            ["S-64", "Nemotron-4 15B", "H100", "BF16", "64", "10.1", "99.0099"],
            ["S-2048", "Nemotron-4 15B", "H100", "BF16", "2048", "10.5", "95.2381"],
            # Twice the work per GPU: not part of the series.
            ["S-4096", "Nemotron-4 15B", "H100", "BF16", "4096", "20", "100"],
            # A trailing number that is not the GPU count, and a series of one.
            ["T1-1", "GPT 1.7B", "A100", "BF16", "32", "1", "1"],
            ["T1-2", "GPT 3.6B", "A100", "BF16", "64", "1", "1"],
            ["U-8", "Llama 8B", "H100", "BF16", "8", "1", "1"],
        ])
        self.job("S-16", "ok 9 111.1111 15e9 H100-SXM5-80GB")
        self.job("S-64", "ok 9.05 110.4972 15e9 H100-SXM5-80GB")
        self.job("S-2048", "ok 9.18 108.9325 15e9 H100-SXM5-80GB")  # +2.0% predicted
        self.job("S-4096", "ok 30 33.3 15e9 H100-SXM5-80GB")
        for i in ("T1-1", "T1-2", "U-8"):
            self.job(i, "ok 1 1 1e9 H100-SXM5-80GB")
        rc, out, err = self.validate([a])
        self.assertEqual(rc, 0, out + err)
        lines = out.splitlines()
        self.assertIn("| series | GPUs | measured growth % | predicted growth % |", lines)
        self.assertIn("| S | 16 -> 2048 | +5.0 | +2.0 |", lines)
        self.assertFalse(any(l.startswith("| T1 |") or l.startswith("| U |") for l in lines), out)

    def test_no_weak_scaling_table_without_a_series(self):
        a = self.table("a.csv", [["x1", "GPT 1.7B", "A100", "BF16", "8", "1", "1"],
                                 ["y-8", "GPT 1.7B", "A100", "BF16", "8", "1", "1"]])
        self.job("x1", "ok 1 1 1e9 A100")
        self.job("y-8", "ok 1 1 1e9 A100")
        rc, out, err = self.validate([a])
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("Weak scaling", out)

    def test_no_memory_table_without_published_memory(self):
        a = self.table("a.csv", [["x1", "GPT 1.7B", "A100", "BF16", "8", "1", "1"]])
        self.job("x1", "ok 1 1 1e9 A100 30")
        rc, out, err = self.validate([a])
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("Peak memory", out)

    def test_only_and_dry_run(self):
        a = self.table("a.csv", [["x1", "GPT 1.7B", "A100", "BF16", "8", "1", "1"],
                                 ["x2", "GPT 1.7B", "A100", "BF16", "8", "1", "1"]])
        self.job("x1", "ok 1 1 1e9 A100")
        self.job("x2", "fail")
        rc, out, err = self.validate([a], ["--only", "x1"])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("over 1 of 1 rows", out)
        rc, out, err = self.validate([a], ["--dry-run"])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("2 job specs, 2 CSV rows", out)
        self.job("x3", "ok 1 1 1e9 A100")
        rc, out, err = self.validate([a], ["--dry-run"])
        self.assertEqual(rc, 1, out)
        self.assertIn("x3.yaml (no CSV row)", out)

    def test_rejects_a_duplicate_id_and_a_missing_column(self):
        a = self.table("a.csv", [["x1", "GPT 1.7B", "A100", "BF16", "8", "1", "1"]])
        b = self.table("b.csv", [["x1", "GPT 1.7B", "A100", "BF16", "8", "1", "1"]])
        rc, out, err = self.validate([a, b], ["--dry-run"])
        self.assertEqual(rc, 2)
        self.assertEqual(err.strip(), "error: %s:2: id x1 already in %s" % (b, a))
        bad = os.path.join(self.tmp.name, "bad.csv")
        with open(bad, "w") as f:
            f.write("id,model,gpus\nx,y,1\n")
        rc, out, err = self.validate([bad], ["--dry-run"])
        self.assertEqual(rc, 2)
        self.assertEqual(err.strip(),
                         "error: %s: missing columns step_time_s, tokens_per_s_per_gpu" % bad)


if __name__ == "__main__":
    unittest.main()
