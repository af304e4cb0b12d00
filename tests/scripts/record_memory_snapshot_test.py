#!/usr/bin/env python3
"""Smoke test of scripts/record_memory_snapshot.py without a GPU.

The workloads run against a stand-in `torch` (a MagicMock) whose
_dump_snapshot writes the hand-crafted `basic` snapshot of tests/mem/data
and whose memory_stats() reports that snapshot's peaks, so that recording,
converting, replaying (with the prism binary named by $PRISM_BINARY, when
set) and the manifest are exercised end to end. What the workloads do on a
real GPU is checked only there.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "record_memory_snapshot.py")
DATA = os.path.join(REPO, "tests", "mem", "data")

FAKE_TORCH = textwrap.dedent("""
    import pickle
    import sys
    from unittest import mock

    sys.path.insert(0, {data!r})
    import make_snapshots

    torch = mock.MagicMock()
    torch.__version__ = "0.0+fake"
    torch.version.cuda = "0.0"
    torch.cuda.get_device_name.return_value = "FakeGPU"
    torch.cuda.get_device_properties.return_value.total_memory = 80 << 30

    def dump(path):
        with open(path, "wb") as f:
            pickle.dump(make_snapshots.basic(), f)

    torch.cuda.memory._dump_snapshot.side_effect = dump
    torch.cuda.memory_stats.return_value = {{
        "allocated_bytes.all.peak": 38802432, "reserved_bytes.all.peak": 56623104,
        "num_alloc_retries": 0, "num_ooms": 0}}
    sys.modules["torch"] = torch
""")


class RecordMemorySnapshotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        fake = os.path.join(self.tmp.name, "fake")
        os.mkdir(fake)
        with open(os.path.join(fake, "torch.py"), "w") as f:
            f.write(FAKE_TORCH.format(data=DATA))
        self.env = dict(os.environ, PYTHONPATH=fake)

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              env=self.env)

    def test_lists_workloads_without_torch(self):
        r = subprocess.run([sys.executable, SCRIPT, "--list"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("max_split_size_mb:64", r.stdout)

    def test_rejects_unknown_workloads(self):
        r = self.run_script("--out", self.tmp.name, "--only", "mlp_adam,nope")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown workload nope", r.stderr)

    def test_records_converts_and_replays(self):
        out = os.path.join(self.tmp.name, "out")
        args = ["--out", out, "--only", "mlp_adam,record_stream,max_split"]
        prism = os.environ.get("PRISM_BINARY")
        if prism:
            args += ["--prism", prism]
        r = self.run_script(*args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertEqual(sorted(manifest), ["max_split", "mlp_adam", "record_stream"])
        info = manifest["max_split"]
        self.assertEqual(info["alloc_conf"], "max_split_size_mb:64")
        self.assertEqual(info["gpu"], "FakeGPU")
        with open(os.path.join(out, "mlp_adam.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "prism-memory-trace")
        self.assertEqual(doc["device_total_memory"], 80 << 30)
        if prism:
            self.assertTrue(info["replay"]["match"], info["replay"])
            self.assertEqual(info["replay"]["recorded_peaks"], [38802432, 56623104])
            self.assertIn("replay: match", r.stdout)


if __name__ == "__main__":
    unittest.main()
