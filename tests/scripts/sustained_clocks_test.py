"""scripts/gpu/sustained_clocks.py's CPU side (the GPU run is docs/gpu.md's):
its shape parsing and refusals, the nvidia-smi sampler against a stand-in
nvidia-smi, the refusal on a host without CUDA; and bench/cpu_time.py, which
pins a rank and records its CPU for bench/torch2_fidelity.sh."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts", "gpu"))
import sustained_clocks  # noqa: E402

SCRIPT = os.path.join(REPO, "scripts", "gpu", "sustained_clocks.py")
CPU_TIME = os.path.join(REPO, "bench", "cpu_time.py")


class ShapeTest(unittest.TestCase):
    def test_shapes(self):
        self.assertEqual(sustained_clocks.parse_shape("bf16:8192x4096x1024"), ("bf16", 8192, 4096, 1024))
        self.assertEqual(sustained_clocks.parse_shape("fp8:16X16X32"), ("fp8", 16, 16, 32))

    def test_refusals(self):
        for bad in ["bf16", "bf16:8x8", "fp32:8x8x8", "bf16:0x8x8", "bf16:axbxc", ""]:
            r = subprocess.run([sys.executable, SCRIPT, "--shape", bad], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--shape", r.stderr)
        r = subprocess.run([sys.executable, SCRIPT, "--seconds", "1"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--seconds must be at least 2", r.stderr)

    def test_no_cuda_is_one_error(self):
        python = os.environ.get("PRISM_TORCH_PYTHON", "")
        if not python or not os.path.exists(python):
            self.skipTest("no torch interpreter (PRISM_TORCH_PYTHON)")
        r = subprocess.run([python, SCRIPT, "--seconds", "2"], capture_output=True, text=True,
                           env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(), "sustained_clocks.py: error: no CUDA device (this check needs a GPU)")


class DatabaseTest(unittest.TestCase):
    def test_gpu_names(self):
        self.assertEqual(sustained_clocks.db_name("NVIDIA H200"), "H200-SXM-141GB")
        self.assertEqual(sustained_clocks.db_name("NVIDIA H100 80GB HBM3"), "H100-SXM5-80GB")
        self.assertIsNone(sustained_clocks.db_name("NVIDIA GeForce RTX 4090"))

    def test_default_shapes_are_in_the_shipped_database(self):
        db_path = os.path.join(REPO, "data", "kernels.csv")
        for gpu in ("H100-SXM5-80GB", "H200-SXM-141GB"):
            db = sustained_clocks.read_db(db_path, gpu)
            for text in sustained_clocks.DEFAULT_SHAPES:
                self.assertIn(sustained_clocks.signature(sustained_clocks.parse_shape(text)), db, gpu)

    def test_read_db_takes_the_gpus_rows(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write("# a comment\ngpu,signature,us,source\nH100-SXM5-80GB,gemm bf16 m=1 n=2 k=3,4.5,x\n"
                    "H200-SXM-141GB,gemm bf16 m=1 n=2 k=3,9,x\n\n")
        try:
            self.assertEqual(sustained_clocks.read_db(f.name, "H100-SXM5-80GB"), {"gemm bf16 m=1 n=2 k=3": 4.5})
            self.assertEqual(sustained_clocks.read_db(f.name, "B200-SXM-180GB"), {})
        finally:
            os.unlink(f.name)


class SamplerTest(unittest.TestCase):
    def test_rows_from_a_stand_in_nvidia_smi(self):
        with tempfile.TemporaryDirectory() as d:
            smi = os.path.join(d, "nvidia-smi")
            with open(smi, "w") as f:
                # A partial line and an [N/A] field are skipped, as the sampler must.
                f.write("#!/bin/sh\necho '[N/A], 1, 2, 3, 4'\n"
                        "while true; do echo \"$(date '+%Y/%m/%d %H:%M:%S.%3N'), 1755, 690.5, 700.00, 61\";"
                        " sleep 0.1; done\n")
            os.chmod(smi, 0o755)
            old = os.environ["PATH"]
            os.environ["PATH"] = d + os.pathsep + old
            try:
                sampler = sustained_clocks.Sampler()
                time.sleep(0.6)
                rows = sampler.stop()
            finally:
                os.environ["PATH"] = old
        self.assertGreaterEqual(len(rows), 3)
        for t, mhz, watts, limit, temp in rows:
            self.assertGreater(t, -1.0)
            self.assertLess(t, 5.0)
            self.assertEqual((mhz, watts, limit, temp), (1755.0, 690.5, 700.0, 61.0))
        self.assertEqual(sustained_clocks.window(rows, -1, 10, 1), 1755.0)
        self.assertIsNone(sustained_clocks.window(rows, 100, 200, 1))

    def test_no_nvidia_smi_gives_no_rows(self):
        old = os.environ["PATH"]
        os.environ["PATH"] = "/nonexistent"
        try:
            self.assertEqual(sustained_clocks.Sampler().stop(), [])
        finally:
            os.environ["PATH"] = old


def load_cpu_time():
    spec = importlib.util.spec_from_file_location("cpu_time", CPU_TIME)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CpuTimeTest(unittest.TestCase):
    def run_it(self, *command, core="0"):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "cpu")
            r = subprocess.run([sys.executable, "-S", "-E", CPU_TIME, out, "rank 3", core, "--", *command],
                               capture_output=True, text=True)
            text = open(out).read() if os.path.exists(out) else ""
        return r, text

    def test_records_cpu_and_pins(self):
        burn = "import os, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n" \
               "print(sorted(os.sched_getaffinity(0)))"
        r, text = self.run_it(sys.executable, "-c", burn, core="1")
        self.assertEqual(r.returncode, 0, r.stderr)
        cores, _ = load_cpu_time().cpu_order(os.sched_getaffinity(0))
        self.assertEqual(r.stdout.strip(), str([cores[1 % len(cores)]]))
        self.assertRegex(text, r"^rank 3 cpu [0-9.]+ [0-9.]+ wall [0-9.]+\n$")
        user, system = float(text.split()[3]), float(text.split()[4])
        self.assertGreaterEqual(user + system, 0.25)

    def test_exit_status_and_signal_are_passed_on(self):
        r, text = self.run_it(sys.executable, "-c", "raise SystemExit(7)")
        self.assertEqual(r.returncode, 7)
        self.assertTrue(text.startswith("rank 3 cpu "))
        r, _ = self.run_it(sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
        self.assertEqual(r.returncode, 128 + 15)

    def test_one_thread_of_each_core_first(self):
        cpu_time = load_cpu_time()
        with tempfile.TemporaryDirectory() as d:
            def host(cores):  # cores[cpu] = (package, core)
                for cpu, (package, core) in enumerate(cores):
                    topo = os.path.join(d, f"cpu{cpu}", "topology")
                    os.makedirs(topo, exist_ok=True)
                    open(os.path.join(topo, "physical_package_id"), "w").write(f"{package}\n")
                    open(os.path.join(topo, "core_id"), "w").write(f"{core}\n")
            # Siblings numbered side by side: 0/1 one core, 2/3 the next.
            host([(0, 0), (0, 0), (0, 1), (0, 1)])
            self.assertEqual(cpu_time.cpu_order({0, 1, 2, 3}, d), ([0, 2, 1, 3], 2))
            # Siblings a half apart (0/2, 1/3), two packages with the same core ids.
            host([(0, 0), (1, 0), (0, 0), (1, 0)])
            self.assertEqual(cpu_time.cpu_order({0, 1, 2, 3}, d), ([0, 1, 2, 3], 2))
            # Only some CPUs allowed; one without topology is a core of its own.
            self.assertEqual(cpu_time.cpu_order({2, 3, 7}, d), ([2, 3, 7], 3))
        r = subprocess.run([sys.executable, "-S", "-E", CPU_TIME, "--cores"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^\d+ CPUs on \d+ physical cores; rank r runs on CPU [0-9,]+\[r\]\n$")

    def test_usage(self):
        r = subprocess.run([sys.executable, CPU_TIME, "f", "x", "0", "true"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("usage: cpu_time.py", r.stderr)


if __name__ == "__main__":
    unittest.main()
