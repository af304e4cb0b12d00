#!/usr/bin/env python3
"""Tests of the GPU bundle (scripts/gpu/bundle.sh, scripts/gpu/check.sh;
docs/gpu.md) that need no GPU: the bundle builds from the build tree, its
self-test (`check.sh --dry-run`) passes, a missing or altered file makes it
fail naming the file, and the GPU run on a host without a GPU ends at once
with one clear error, leaving its figures file and no process behind.

Environment: PRISM_BUILD_DIR, the CMake build folder (prism, rank_player,
lib/libnccl.so.2 and lib/libprism_client.so built).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PRISM_BUILD_DIR", os.path.join(REPO, "build"))


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


class GpuBundleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gpu_bundle_test.")
        cls.bundle = os.path.join(cls.tmp.name, "gpu-bundle")
        r = run(["bash", os.path.join(REPO, "scripts/gpu/bundle.sh"), "--build", BUILD,
                 "--out", cls.bundle, "--no-wheels"])
        if r.returncode != 0:
            raise AssertionError("bundle.sh failed:\n" + r.stdout + r.stderr)
        cls.bundle_output = r.stdout

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def dry_run(self):
        return run(["bash", os.path.join(self.bundle, "check.sh"), "--dry-run"])

    def manifest(self):
        with open(os.path.join(self.bundle, "MANIFEST")) as f:
            return [line.split() for line in f]

    def test_bundle_has_what_the_gpu_host_needs(self):
        self.assertRegex(self.bundle_output, r"MiB \(limit 60 MiB\)")
        paths = {row[0] for row in self.manifest()}
        for p in ["bin/prism", "bin/rank_player", "lib/libnccl.so.2", "lib/libprism_client.so",
                  "check.sh", "build_torch_backend.sh", "torch_backend/CMakeLists.txt",
                  "torch_backend/src/shim/torch/backend.cc", "torch_backend/third_party/asio.hpp",
                  "python/sitecustomize.py", "python/prism_torch/__init__.py",
                  "examples/cuda_gpt/train.py", "examples/jobs/cuda-gpt-1024.yaml",
                  "examples/megatron_gpt/train.py", "examples/jobs/megatron-gpt-pp4-1024.yaml",
                  "data/kernels.csv", "scripts/measure_kernels.py", "gpu/nccl_footprint.py",
                  "gpu/release_latency.py", "gpu/coordinator_gone.py", "gpu/insitu_figures.py",
                  "gpu/sustained_clocks.py"]:
            self.assertIn(p, paths)
        # glibc and libstdc++ are the host's, never the bundle's.
        libs = os.listdir(os.path.join(self.bundle, "lib"))
        for lib in libs:
            self.assertNotRegex(lib, r"^(libc|libm|libstdc\+\+|libgcc_s|ld-linux)[.-]")
        self.assertTrue(any(lib.startswith("libfmt") for lib in libs), libs)
        for row in self.manifest():
            self.assertEqual(len(row), 3, row)
            self.assertRegex(row[2], r"^[0-9a-f]{64}$")

    def test_bundle_past_its_limit_is_refused(self):
        out = os.path.join(self.tmp.name, "too-big")
        r = run(["bash", os.path.join(REPO, "scripts/gpu/bundle.sh"), "--build", BUILD,
                 "--out", out, "--no-wheels"], env=dict(os.environ, PRISM_BUNDLE_LIMIT_MIB="1"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"bundle\.sh: error: the bundle .*too-big is [\d.]+ MiB, "
                                   r"over the 1 MiB limit")

    def test_dry_run_passes(self):
        r = self.dry_run()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"dry run: \d+ passed, 0 failed")
        self.assertIn("ok    manifest:", r.stdout)
        self.assertIn("ok    ldd lib/libnccl.so.2: resolves", r.stdout)
        self.assertIn("ok    ldd bin/prism: resolves", r.stdout)
        self.assertIn("ok    bash -n check.sh", r.stdout)
        self.assertIn("ok    python compiles examples/cuda_gpt/train.py", r.stdout)
        self.assertIn("libcuda.so.1", r.stdout)  # says why it is not looked for

    def test_dry_run_names_a_missing_or_altered_file(self):
        victim = os.path.join(self.bundle, "examples/cuda_gpt/train.py")
        with open(victim, "rb") as f:
            saved = f.read()
        try:
            os.remove(victim)
            r = self.dry_run()
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("FAIL  manifest: examples/cuda_gpt/train.py missing", r.stdout)
            self.assertRegex(r.stdout, r"dry run: \d+ passed, [1-9]\d* failed")
            with open(victim, "wb") as f:
                f.write(saved + b"\n# changed\n")
            r = self.dry_run()
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("FAIL  manifest: examples/cuda_gpt/train.py differs", r.stdout)
        finally:
            with open(victim, "wb") as f:
                f.write(saved)
        self.assertEqual(self.dry_run().returncode, 0)

    def test_gpu_run_without_a_gpu_ends_with_one_clear_error(self):
        out = os.path.join(self.tmp.name, "run")
        r = run(["bash", os.path.join(self.bundle, "check.sh"), "--out", out,
                 "--python", sys.executable], cwd=self.tmp.name)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("error: no usable GPU", r.stdout)
        with open(os.path.join(out, "check.log")) as f:
            self.assertIn("error: no usable GPU", f.read())
        self.assertTrue(os.path.exists(os.path.join(out, "figures.json")))

    def test_gpu_run_machinery_without_a_gpu(self):
        # PRISM_CHECK_NO_GPU_OK (testing only) goes past the GPU check: (g)
        # lists the H100 validation jobs' modelled kernels, its measuring step
        # fails at once (no CUDA), and the figures file still gets (g)'s figures;
        # (m) plans the union of the same lists (made once) and its measuring
        # fails as (g)'s; (k) has no trace to calibrate.
        out = os.path.join(self.tmp.name, "run_g")
        env = dict(os.environ, PRISM_CHECK_NO_GPU_OK="1",
                   PRISM_CHECK_GPU_NAME="NVIDIA H100 80GB HBM3")
        r = run(["bash", os.path.join(self.bundle, "check.sh"), "--out", out, "--only", "g,m,k,f,zz",
                 "--budget", "120", "--python", sys.executable], cwd=self.tmp.name, env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"g: [1-9]\d* kernel signatures of H100-SXM5-80GB")
        # (f) reads (a) ddp's capture; without it, it says so and moves on.
        self.assertIn("f: no capture of (a) ddp (run --only a,f): skipped", r.stdout)
        self.assertIn("unknown check 'zz'", r.stdout)
        with open(os.path.join(out, "figures.json")) as f:
            figures = json.load(f)
        self.assertEqual(figures["g_kernels"]["gpu"], "H100-SXM5-80GB")
        self.assertGreater(figures["g_kernels"]["wanted"], 0)
        self.assertEqual(figures["g_kernels"]["measured"], 0)
        self.assertIn("skipped", figures["f_capture"])
        self.assertRegex(r.stdout, r"m: [1-9]\d* signatures in the validation jobs' union")
        self.assertGreater(figures["m_kernels"]["wanted"], figures["g_kernels"]["wanted"])
        self.assertEqual(figures["m_kernels"]["measured"], 0)
        self.assertNotEqual(figures["k_kineto"]["calibrate_exit"], 0)

    def test_kernel_time_of_two_traces(self):
        # (c)'s primary figure: the device events' time per step of two
        # Kineto traces; a trace without device events is one clear error.
        def trace(name, durs):
            path = os.path.join(self.tmp.name, name)
            ev = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 10 * i, "dur": d} for i, d in enumerate(durs)]
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1000})
            with open(path, "w") as f:
                json.dump({"traceEvents": ev}, f)
            return path
        tool = os.path.join(self.bundle, "gpu", "trace_kernels.py")
        a, e = trace("a.json", [4, 4, 2]), trace("e.json", [4, 4, 2.05])
        r = run([sys.executable, tool, "--alone", a, "--emulated", e])
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.split("KERNELS ", 1)[1])
        self.assertEqual(out["alone"]["events"], 3)
        self.assertAlmostEqual(out["alone"]["kernel_ms_per_step"], 0.005)
        self.assertAlmostEqual(out["percent_apart"], 0.5)
        self.assertTrue(out["within_1_percent"])
        cpu = os.path.join(self.tmp.name, "cpu.json")
        with open(cpu, "w") as f:
            json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 5}]}, f)
        r = run([sys.executable, tool, "--alone", cpu, "--emulated", e])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no device events", r.stderr)

    def test_coordinator_gone_on_cpu(self):
        # (h)'s mechanics on CPU (the c10d backend instead of the drop-in):
        # prism killed during the emulation, the orphaned rank ends by itself
        # with the backend's error, and the script says so in one GONE line.
        py = os.environ.get("PRISM_TORCH_PYTHON", "")
        if not py or run([py, "-c", "import torch"]).returncode != 0:
            self.skipTest("no torch interpreter (PRISM_TORCH_PYTHON)")
        out = os.path.join(self.tmp.name, "gone")
        r = run([py, os.path.join(REPO, "scripts", "gpu", "coordinator_gone.py"),
                 "--prism", os.path.join(BUILD, "bin", "prism"),
                 "--job", "examples/jobs/cuda-gpt-1024.yaml", "--out", out, "--python", py,
                 "--device", "cpu", "--after-steps", "2", "--within", "60", "--",
                 "--dim", "64", "--heads", "4", "--vocab", "512", "--seq", "64", "--batch", "2",
                 "--layers", "1"], cwd=REPO)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        gone = json.loads(r.stdout.split("GONE ", 1)[1])
        self.assertTrue(gone["rank_ended"], gone)
        self.assertLess(gone["rank_ended_after_s"], 60)
        self.assertGreaterEqual(gone["emulation_step"], 2)
        self.assertNotEqual(gone["rank_exit"], 0)
        self.assertTrue(any("coordinator" in line for line in gone["rank_stderr_tail"]), gone)


if __name__ == "__main__":
    unittest.main(verbosity=2)
