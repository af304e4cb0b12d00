#!/usr/bin/env python3
"""Tests of scripts/fit_gemm_curve.py (docs/compute.md, "Fitting the GEMM
curve"): its curve mirrors the C++ model's (the model_us of a golden kernel
list written by prism simulate), the fit recovers the constants of a synthetic
database and reproduces the shipped ones from data/kernels.csv, and each bad
input is refused with one error line."""

import csv
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "fit_gemm_curve.py")
GOLDEN_KERNELS = os.path.join(REPO, "tests", "cli", "golden", "simulate_small.kernels.csv")
# The report of the same prism simulate run (tests/cli/cli_test.cc, simulate_small).
GOLDEN_REPORT = os.path.join(REPO, "tests", "cli", "golden", "simulate_small.report.json")

spec = importlib.util.spec_from_file_location("fit_gemm_curve", SCRIPT)
fit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fit)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)


def shape(sig):
    words = sig.split()
    dims = dict(w.split("=") for w in words[2:])
    return words[1], int(dims["m"]), int(dims["n"]), int(dims["k"]), int(dims.get("batch", 1))


class MirrorTest(unittest.TestCase):
    def test_matches_the_cpp_model(self):
        # prism simulate --kernels writes the time the simulation uses (model_us,
        # 3 decimals): the curve's, its kernel part (not the launch floor) x the
        # GPU's sustained slowdown (src/compute/gpu_spec.cc: Hopper 1.0296 bf16,
        # 1.0 FP8; docs/compute.md, "Sustained clocks") x the job's slowest-GPU
        # factor (16 GPUs: 1 + 0.016 x 1.7660; "The slowest GPU"), which the
        # run's report gives.
        g = fit.GPUS["H100-SXM5-80GB"]
        with open(GOLDEN_REPORT) as f:
            slowest = json.load(f)["kernels"]["slowest_gpu_slowdown"]
        self.assertAlmostEqual(slowest, 1 + 0.016 * 1.765991, delta=1e-6)
        sustained = {"bf16": 1.0296 * slowest, "fp8": 1.0 * slowest}
        n = 0
        with open(GOLDEN_KERNELS) as f:
            for row in csv.DictReader(f):
                if row["gpu"] != "H100-SXM5-80GB" or not row["signature"].startswith("gemm "):
                    continue
                dtype, m, nn, k, b = shape(row["signature"])
                e, kh = g["shipped"][dtype]
                burst = fit.modelled_us(g, fit.row_terms(g, dtype, m, nn, k, b), k, e, kh)
                launch = g["launch"] * 1e6
                us = (burst - launch) * sustained[dtype] + launch
                self.assertAlmostEqual(us, float(row["model_us"]), delta=0.002, msg=row["signature"])
                n += 1
        self.assertGreater(n, 10)


class FitTest(unittest.TestCase):
    def test_recovers_the_constants_of_a_synthetic_database(self):
        g = fit.GPUS["H100-SXM5-80GB"]
        shapes = [(m, n, k) for m in (1024, 4096, 16384) for n in (1536, 4096, 12288)
                  for k in (512, 2048, 8192)]
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "db.csv")
            with open(db, "w") as f:
                f.write("gpu,signature,us,source\n")
                for dtype, (e, kh) in (("bf16", (0.70, 320)), ("fp8", (0.62, 480))):
                    for m, n, k in shapes:
                        us = fit.modelled_us(g, fit.row_terms(g, dtype, m, n, k, 1), k, e, kh)
                        f.write("H100-SXM5-80GB,gemm %s m=%d n=%d k=%d,%.4f,test\n" % (dtype, m, n, k, us))
                f.write("H100-SXM5-80GB,mem norm_fwd bytes=1000,1.0,test\n")
            out = run("--db", db)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("H100-SXM5-80GB bf16: fitted E=0.70 k_half=320", out.stdout)
        self.assertIn("H100-SXM5-80GB fp8: fitted E=0.62 k_half=480", out.stdout)
        self.assertIn("measured/modelled over 27 rows: median 1.000", out.stdout)

    def test_shipped_constants_are_the_h100_fit(self):
        out = run("--gpu", "H100-SXM5-80GB")
        self.assertEqual(out.returncode, 0, out.stderr)
        for dtype in ("bf16", "fp8"):
            e, kh = fit.GPUS["H100-SXM5-80GB"]["shipped"][dtype]
            self.assertIn("H100-SXM5-80GB %s: fitted E=%.2f k_half=%d" % (dtype, e, kh), out.stdout)
        self.assertEqual(fit.GPUS["H200-SXM-141GB"]["shipped"], fit.GPUS["H100-SXM5-80GB"]["shipped"])

    def test_gap_with_given_constants(self):
        out = run("--gap-only", "--gpu", "H100-SXM5-80GB", "--constants", "bf16=0.80,128",
                  "--constants", "fp8=0.71,128")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("H100-SXM5-80GB bf16: E=0.80 k_half=128 (given)", out.stdout)
        self.assertIn("measured/modelled over 252 rows: median 1.093", out.stdout)
        self.assertIn("measured/modelled over 246 rows: median 1.107", out.stdout)
        self.assertNotIn("fitted", out.stdout)


class RejectionTest(unittest.TestCase):
    def refused(self, args, message, db_text=None):
        with tempfile.TemporaryDirectory() as tmp:
            if db_text is not None:
                db = os.path.join(tmp, "db.csv")
                with open(db, "w") as f:
                    f.write(db_text)
                args = ["--db", db] + args
            out = run(*args)
        self.assertEqual(out.returncode, 2)
        self.assertEqual(out.stdout, "")
        self.assertEqual(len(out.stderr.splitlines()), 1, out.stderr)
        self.assertTrue(out.stderr.startswith("error: "), out.stderr)
        self.assertIn(message, out.stderr)

    def test_unknown_gpu(self):
        self.refused(["--gpu", "A100-SXM4-80GB"], "--gpu A100-SXM4-80GB: no curve constants")

    def test_gpu_without_rows(self):
        self.refused(["--gpu", "H200-SXM-141GB"], "--gpu H200-SXM-141GB: no GEMM rows",
                     "gpu,signature,us\nH100-SXM5-80GB,gemm bf16 m=1 n=1 k=1,1.0\n")

    def test_bad_constants(self):
        self.refused(["--constants", "bf16=1.5,128"], "E must be in (0, 1]")
        self.refused(["--constants", "bf16=0.8"], "expected TYPE=E,K_HALF")

    def test_missing_file(self):
        self.refused(["--db", "/nonexistent/kernels.csv"], "/nonexistent/kernels.csv")

    def test_bad_header_and_rows(self):
        self.refused([], "header needs gpu, signature and us", "gpu,sig,us\n")
        self.refused([], ":2: 2 fields, header has 3", "gpu,signature,us\nH100-SXM5-80GB,x\n")
        self.refused([], ":2: malformed GEMM row", "gpu,signature,us\nH100-SXM5-80GB,gemm bf16 m=1 n=1,1\n")


if __name__ == "__main__":
    unittest.main()
