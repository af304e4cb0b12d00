#!/usr/bin/env python3
"""Tests of scripts/memory_snapshot_to_json.py on synthetic pickles built in
the exact structure torch.cuda.memory._dump_snapshot() writes, and of the
hand-crafted snapshots in tests/mem/data (make_snapshots.py), and of pickles
recorded on an H100 (tests/mem/data/h100-torch2.11)."""

import collections
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "memory_snapshot_to_json.py")
DATA = os.path.join(REPO, "tests", "mem", "data")
sys.path.insert(0, os.path.join(REPO, "scripts"))
sys.path.insert(0, DATA)

import make_snapshots  # noqa: E402
import memory_snapshot_to_json as conv  # noqa: E402

FRAMES = [{"name": "f", "filename": "x.py", "line": 1}]


def entry(action, addr, size, stream=0):
    e = {"action": action, "size": size, "stream": stream, "frames": FRAMES, "time_us": 17}
    e["device_free" if action == "oom" else "addr"] = addr
    return e


def seg(addr, device=0, pool=(0, 0)):
    return {"device": device, "address": addr, "total_size": 2097152, "allocated_size": 512,
            "active_size": 512, "requested_size": 100, "stream": 0, "segment_type": "small",
            "segment_pool_id": pool, "is_expandable": False, "frames": FRAMES,
            "blocks": [{"address": addr, "size": 512, "requested_size": 100,
                        "state": "active_allocated", "frames": FRAMES},
                       {"address": addr + 512, "size": 2096640, "requested_size": 0,
                        "state": "inactive", "frames": []}]}


def two_device_snapshot():
    return {
        "segments": [seg(0x2000, device=1), seg(0x1000, device=0)],
        "device_traces": [
            [entry("segment_alloc", 0x1000, 2097152), entry("alloc", 0x1000, 100)],
            [entry("segment_alloc", 0x2000, 2097152), entry("alloc", 0x2000, 100),
             entry("oom", 5 << 20, 1 << 30)],
        ],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:4",
            "max_split_size": -1, "garbage_collection_threshold": 0.0,
            "expandable_segments": False, "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
            # torch's keys: interval starts in MiB, as strings, in insertion order
            "roundup_power2_divisions": {str(1 << i): (4 if i < 2 else 0) for i in range(16)},
        },
    }


class ConverterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, name, obj, raw=None):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(raw if raw is not None else pickle.dumps(obj))
        return path

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def test_committed_snapshots_are_what_the_generator_and_converter_make(self):
        for name in make_snapshots.SNAPSHOTS:
            with open(os.path.join(DATA, name + ".json")) as f:
                committed = f.read()
            self.assertEqual(make_snapshots.json_text(name, self.tmp.name), committed,
                             "%s.json is stale: run tests/mem/data/make_snapshots.py" % name)

    def test_recorded_pickles_convert_to_the_committed_traces(self):
        # Pickles torch 2.11 wrote on an H100 (record_memory_snapshot.py).
        recorded = os.path.join(DATA, "h100-torch2.11")
        with open(os.path.join(recorded, "manifest.json")) as f:
            manifest = json.load(f)
        for name in ("mlp_adam", "expandable_oom"):
            out = os.path.join(self.tmp.name, name + ".json")
            r = self.run_script(os.path.join(recorded, name + ".pickle"), "--device-memory",
                                str(manifest[name]["total_memory"]), "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f, open(os.path.join(recorded, name + ".json")) as g:
                self.assertEqual(f.read(), g.read(), name)

    def test_converts_one_device(self):
        doc = conv.convert(two_device_snapshot(), device=1, source="s.pickle")
        self.assertEqual(list(doc), ["format", "version", "source", "device",
                                     "allocator_settings", "trace", "final_segments"])
        self.assertEqual(doc["format"], "prism-memory-trace")
        self.assertEqual(doc["version"], 1)
        self.assertEqual(doc["device"], 1)
        self.assertEqual(doc["trace"], [["segment_alloc", 0x2000, 2097152, 0],
                                        ["alloc", 0x2000, 100, 0],
                                        ["oom", 5 << 20, 1 << 30, 0]])  # device_free as addr
        self.assertEqual(len(doc["final_segments"]), 1)
        s = doc["final_segments"][0]
        self.assertEqual(s["address"], 0x2000)
        self.assertNotIn("frames", s)
        self.assertNotIn("frames", s["blocks"][0])
        self.assertEqual(s["blocks"][0], {"address": 0x2000, "size": 512, "requested_size": 100,
                                          "state": "active_allocated"})
        settings = doc["allocator_settings"]
        self.assertEqual(settings["PYTORCH_CUDA_ALLOC_CONF"], "roundup_power2_divisions:4")
        self.assertEqual(settings["max_split_size"], -1)
        self.assertEqual(settings["roundup_power2_divisions"], [4, 4] + [0] * 14)
        self.assertNotIn("pinned_num_register_threads", settings)

    def test_device_memory(self):
        doc = conv.convert(two_device_snapshot(), device=0, device_memory=85031714816)
        self.assertEqual(list(doc)[:3], ["format", "version", "device"])
        self.assertEqual(doc["device_total_memory"], 85031714816)
        self.assertNotIn("device_total_memory", conv.convert(two_device_snapshot(), device=0))
        r = self.run_script(self.write("s.pickle", two_device_snapshot()), "--device", "0",
                            "--device-memory", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--device-memory must be > 0", r.stderr)

    def test_the_only_recorded_device_is_the_default(self):
        snap = two_device_snapshot()
        snap["device_traces"][1] = []
        self.assertEqual(conv.convert(snap)["device"], 0)

    def test_several_devices_need_a_choice(self):
        with self.assertRaisesRegex(conv.SnapshotError,
                                    "devices 0, 1 have memory histories: choose one with --device"):
            conv.convert(two_device_snapshot())
        with self.assertRaisesRegex(conv.SnapshotError, r"--device 2: the snapshot has devices 0-1"):
            conv.convert(two_device_snapshot(), device=2)

    def test_no_history(self):
        snap = {"segments": [], "device_traces": [[], []]}
        with self.assertRaisesRegex(conv.SnapshotError, "no device has a memory history"):
            conv.convert(snap)

    def test_older_snapshots_without_settings(self):
        snap = two_device_snapshot()
        del snap["allocator_settings"]
        self.assertIsNone(conv.convert(snap, device=0)["allocator_settings"])

    def test_bad_trace_entries_are_named(self):
        snap = two_device_snapshot()
        del snap["device_traces"][0][1]["size"]
        with self.assertRaisesRegex(conv.SnapshotError,
                                    "trace entry 1: 'size' is None, not an integer"):
            conv.convert(snap, device=0)
        snap["device_traces"][0][1] = ["alloc", 1, 2, 3]
        with self.assertRaisesRegex(conv.SnapshotError, "trace entry 1: not a TraceEntry"):
            conv.convert(snap, device=0)

    def test_private_pool_segments_warn(self):
        snap = two_device_snapshot()
        snap["segments"][1]["segment_pool_id"] = (1, 0)
        err = io.StringIO()
        with redirect_stderr(err):
            conv.convert(snap, device=0)
        self.assertIn("private pool (1, 0) (CUDA graphs)", err.getvalue())

    def test_command_line_writes_the_file_or_stdout(self):
        path = self.write("s.pickle", two_device_snapshot())
        out = os.path.join(self.tmp.name, "s.json")
        r = self.run_script(path, "--device", "0", "-o", out)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
        with open(out) as f:
            text = f.read()
        self.assertEqual(json.loads(text)["trace"][1], ["alloc", 0x1000, 100, 0])
        self.assertIn('\n    ["alloc",4096,100,0]\n', text)  # one entry per line
        r = self.run_script(path, "--device", "0")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, text)

    def test_command_line_rejects_what_is_not_a_snapshot(self):
        cases = [
            ("text.pickle", None, b"hello", "not a pickle"),
            ("list.pickle", [1, 2], None, r"not a torch memory snapshot \(a list\)"),
            ("dict.pickle", {"segments": []}, None,
             r"not a torch memory snapshot \(a dict without 'device_traces'\)"),
            ("class.pickle", collections.OrderedDict(a=1), None,
             "the pickle refers to collections.OrderedDict"),
        ]
        for name, obj, raw, message in cases:
            path = self.write(name, obj, raw)
            r = self.run_script(path)
            self.assertEqual(r.returncode, 1, name)
            self.assertEqual(r.stdout, "", name)
            self.assertRegex(r.stderr, "^error: " + path + ": " + message, name)
            self.assertEqual(r.stderr.count("\n"), 1, name)
        r = self.run_script(os.path.join(self.tmp.name, "missing.pickle"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "^error: .*missing.pickle: .*No such file")

    def test_several_devices_on_the_command_line(self):
        r = self.run_script(self.write("s.pickle", two_device_snapshot()))
        self.assertEqual(r.returncode, 1)
        self.assertIn("choose one with --device", r.stderr)


if __name__ == "__main__":
    unittest.main()
