#!/usr/bin/env python3
"""Tests of scripts/measure_kernels.py's CPU side (docs/compute.md, "Measuring
kernels"): signature parsing and its refusals, the union of several inputs
(kernel lists of several jobs), and the plan --dry-run prints (what would
run for each kind, or why it would be skipped), all without torch."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "measure_kernels.py")
GOLDEN_KERNELS = os.path.join(REPO, "tests", "cli", "golden", "simulate_small.kernels.csv")

spec = importlib.util.spec_from_file_location("measure_kernels", SCRIPT)
mk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mk)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)


class SignatureTest(unittest.TestCase):
    def test_parses_each_kind(self):
        s = mk.parse_signature("gemm fp8 m=8192 n=3072 k=1024 batch=8")
        self.assertEqual((s.kind, s.dtype, s.get("batch")), ("gemm", "fp8", 8))
        s = mk.parse_signature("attn_bwd bf16 b=1 hq=32 hkv=8 sq=4096 skv=2048 d=128")
        self.assertEqual((s.kind, s.causal, s.get("skv")), ("attn_bwd", False, 2048))
        s = mk.parse_signature("mem  rmsnorm_fwd   bytes=1024")
        self.assertEqual((s.op, s.text), ("rmsnorm_fwd", "mem rmsnorm_fwd bytes=1024"))
        self.assertIsNone(mk.parse_signature("gemm bf16 m=1 n=1 k=1").acc)

    def test_parses_accumulating_gemms(self):
        # A weight gradient added into main_grad: `acc=` after the sizes.
        s = mk.parse_signature("gemm bf16 m=4096 n=1024 k=8192 batch=4 acc=fp32")
        self.assertEqual((s.acc, s.get("batch"), s.text),
                         ("fp32", 4, "gemm bf16 m=4096 n=1024 k=8192 batch=4 acc=fp32"))
        self.assertEqual(mk.parse_signature("gemm fp8 m=16 n=16 k=16 acc=bf16").acc, "bf16")

    def test_refuses_what_is_not_a_signature(self):
        for text, why in [("conv bf16 m=1", "unknown kernel kind 'conv'"),
                          ("gemm fp16 m=1 n=1 k=1", "expected a dtype"),
                          ("gemm bf16 m=1 n=1", "missing field 'k'"),
                          ("gemm bf16 m=1 n=1 k=1 d=3", "unexpected field 'd'"),
                          ("attn_fwd bf16 b=1 hq=6 hkv=4 sq=1 skv=1 d=1", "multiple of hkv"),
                          ("gemm bf16 m=x n=1 k=1", "bad field 'm=x'"),
                          ("gemm bf16 m=1 n=1 k=1 acc=fp16", "bad accumulate type 'fp16'"),
                          ("gemm bf16 m=1 n=1 k=1 acc=", "bad accumulate type ''"),
                          ("gemm bf16 m=1 n=1 k=1 acc=fp32 acc=bf16", "'acc' given twice"),
                          ("attn_fwd bf16 b=1 hq=1 hkv=1 sq=1 skv=1 d=1 acc=fp32",
                           "bad field 'acc=fp32'")]:
            with self.assertRaises(ValueError) as e:
                mk.parse_signature(text)
            self.assertIn(why, str(e.exception), text)


class PlanTest(unittest.TestCase):
    def plan(self, text, measure_mem=False):
        return mk.plan(mk.parse_signature(text), measure_mem)

    def test_gemms(self):
        self.assertEqual(self.plan("gemm bf16 m=4096 n=1024 k=512"),
                         "torch.matmul [4096,512]x[512,1024]")
        self.assertEqual(self.plan("gemm bf16 m=64 n=32 k=16 batch=8"),
                         "torch.bmm [8,64,16]x[8,16,32]")
        self.assertEqual(self.plan("gemm fp8 m=4096 n=1024 k=512"),
                         "torch._scaled_mm e4m3 [4096,512]x[512,1024] -> bf16")
        self.assertEqual(self.plan("gemm fp8 m=4096 n=1024 k=512 batch=4"),
                         "torch._scaled_mm e4m3 [4096,512]x[512,1024] -> bf16 x4 calls")
        self.assertEqual(self.plan("gemm fp8 m=4096 n=8 k=512"),
                         "skip: fp8 GEMM needs m, n, k multiples of 16")

    def test_accumulating_gemms(self):
        self.assertEqual(self.plan("gemm bf16 m=4096 n=1024 k=512 acc=fp32"),
                         "torch.addmm [4096,512]x[512,1024] out_dtype=fp32, in place into "
                         "C[4096,1024] fp32 (beta=1)")
        self.assertEqual(self.plan("gemm bf16 m=64 n=32 k=16 batch=8 acc=fp32"),
                         "torch.baddbmm [8,64,16]x[8,16,32] out_dtype=fp32, in place into "
                         "C[8,64,32] fp32 (beta=1)")
        self.assertEqual(self.plan("gemm bf16 m=64 n=32 k=16 acc=bf16"),
                         "torch.addmm [64,16]x[16,32], in place into C[64,32] bf16 (beta=1)")
        self.assertEqual(self.plan("gemm fp8 m=4096 n=1024 k=512 batch=2 acc=fp32"),
                         "torch._scaled_mm e4m3 [4096,512]x[512,1024] -> fp32 x2 calls "
                         "(C not read: _scaled_mm cannot accumulate)")
        self.assertEqual(self.plan("gemm fp8 m=4096 n=8 k=512 acc=fp32"),
                         "skip: fp8 GEMM needs m, n, k multiples of 16")

    def test_attention_including_cp_halves(self):
        # Context parallelism's off-diagonal blocks: half the keys, no mask.
        self.assertEqual(self.plan("attn_fwd bf16 b=1 hq=32 hkv=8 sq=4096 skv=2048 d=128"),
                         "sdpa forward b=1 hq=32 hkv=8 sq=4096 skv=2048 d=128, no mask, enable_gqa")
        self.assertEqual(self.plan("attn_bwd bf16 b=1 hq=8 hkv=8 sq=2048 skv=4096 d=64 causal"),
                         "sdpa backward (autograd.grad) b=1 hq=8 hkv=8 sq=2048 skv=4096 d=64, "
                         "causal_lower_right")
        self.assertEqual(self.plan("attn_fwd bf16 b=2 hq=8 hkv=8 sq=64 skv=64 d=64 causal"),
                         "sdpa forward b=2 hq=8 hkv=8 sq=64 skv=64 d=64, is_causal")
        self.assertEqual(self.plan("attn_fwd fp8 b=2 hq=8 hkv=8 sq=64 skv=64 d=64"),
                         "skip: only bf16 attention is measured")

    def test_memory_bound(self):
        self.assertTrue(self.plan("mem adam bytes=100").startswith("skip: memory-bound"))
        self.assertEqual(self.plan("mem adam bytes=100", True), "device copy of 100 bytes")


class DryRunTest(unittest.TestCase):
    def test_the_union_of_several_inputs(self):
        with tempfile.TemporaryDirectory() as d:
            extra = os.path.join(d, "extra.txt")
            with open(extra, "w") as f:
                f.write("# one shared with the golden list, two new, one bad\n"
                        "gemm bf16 m=1024 n=1536 k=2048 acc=fp32\n"
                        "attn_fwd bf16 b=1 hq=8 hkv=8 sq=2048 skv=1024 d=64\n"
                        "gemm fp8 m=1024 n=1536 k=2048\n"
                        "gemm bf16 m=1\n")
            r = run(GOLDEN_KERNELS, extra, "--dry-run")
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = r.stdout.splitlines()
            sigs = [l.split("\t")[0] for l in lines]
            self.assertEqual(sigs, sorted(set(sigs)))
            with open(GOLDEN_KERNELS) as f:
                golden = len(f.readlines()) - 1
            self.assertEqual(len(sigs), golden + 2)
            self.assertIn("attn_fwd bf16 b=1 hq=8 hkv=8 sq=2048 skv=1024 d=64\t"
                          "sdpa forward b=1 hq=8 hkv=8 sq=2048 skv=1024 d=64, no mask", lines)
            self.assertIn("warning: skipping 'gemm bf16 m=1': missing field 'n'", r.stderr)
            self.assertRegex(r.stderr, r"%d signatures \(\d+ gemm, \d+ attention, \d+ mem\) from "
                             r"2 inputs: \d+ to measure, \d+ to skip" % len(sigs))

    def test_options(self):
        r = run(GOLDEN_KERNELS, "--dry-run", "--limit", "2", "--measure-mem")
        self.assertEqual(len(r.stdout.splitlines()), 2)
        self.assertIn("--profile FILE", run("--help").stdout)
        r = run("--dry-run")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("the following arguments are required: input", r.stderr)
        r = run(GOLDEN_KERNELS, "--repeats", "0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--repeats >= 1", r.stderr)
        r = run(os.path.join(REPO, "no-such-list.csv"), "--dry-run")
        self.assertEqual(r.returncode, 2)
        self.assertIn("error:", r.stderr)


TORCH_PYTHON = os.environ.get("PRISM_TORCH_PYTHON", "")


@unittest.skipUnless(TORCH_PYTHON and os.path.exists(TORCH_PYTHON), "no PRISM_TORCH_PYTHON (torch)")
class ProfileTest(unittest.TestCase):
    def test_profile_holds_three_calls_of_each_kernel_with_shapes(self):
        # On the CPU (torch from PRISM_TORCH_PYTHON): --profile's trace has the
        # ops `prism calibrate kineto` maps, three calls each, with shapes; a
        # memory-bound copy is not profiled.
        with tempfile.TemporaryDirectory() as d:
            sigs = os.path.join(d, "sigs.txt")
            with open(sigs, "w") as f:
                f.write("gemm bf16 m=64 n=32 k=16\ngemm bf16 m=64 n=32 k=16 batch=2\n"
                        "attn_fwd bf16 b=1 hq=4 hkv=2 sq=32 skv=32 d=16 causal\n"
                        "mem x bytes=1024\n")
            trace = os.path.join(d, "p.json")
            r = subprocess.run([TORCH_PYTHON, SCRIPT, sigs, "--device", "cpu", "--profile", trace,
                                "--measure-mem", "--repeats", "2", "--warmup", "1"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("4 of 4 kernels measured", r.stderr)
            import json
            with open(trace) as f:
                doc = json.load(f)
            self.assertEqual(doc.get("record_shapes"), 1)
            ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
            count = lambda name: sum(e["name"] == name for e in ops)
            self.assertEqual(count("aten::matmul"), 3)
            self.assertEqual(count("aten::bmm"), 3)
            self.assertEqual(count("aten::scaled_dot_product_attention"), 3)
            bmm = next(e for e in ops if e["name"] == "aten::bmm")
            self.assertEqual(bmm["args"]["Input Dims"], [[2, 64, 16], [2, 16, 32]])

    def test_accumulating_gemms_on_the_cpu(self):
        # acc=bf16 runs in place (addmm/baddbmm with out=C) on the CPU; acc=fp32
        # needs aten::addmm.dtype_out, which only CUDA has: skipped, never called.
        with tempfile.TemporaryDirectory() as d:
            sigs = os.path.join(d, "sigs.txt")
            with open(sigs, "w") as f:
                f.write("gemm bf16 m=64 n=32 k=16 acc=bf16\n"
                        "gemm bf16 m=64 n=32 k=16 batch=2 acc=bf16\n"
                        "gemm bf16 m=64 n=32 k=16 acc=fp32\n")
            out = os.path.join(d, "out.csv")
            r = subprocess.run([TORCH_PYTHON, SCRIPT, sigs, "--device", "cpu", "--out", out,
                                "--repeats", "2", "--warmup", "1"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("gemm bf16 m=64 n=32 k=16 acc=fp32 skipped: acc=fp32 needs CUDA",
                          r.stderr)
            self.assertIn("2 of 3 kernels measured", r.stderr)
            with open(out) as f:
                rows = f.read().splitlines()
            self.assertEqual([row.split(",")[1] for row in rows[1:]],
                             ["gemm bf16 m=64 n=32 k=16 acc=bf16",
                              "gemm bf16 m=64 n=32 k=16 batch=2 acc=bf16"])


if __name__ == "__main__":
    unittest.main()
