#!/usr/bin/env python3
"""Tests of scripts/fuzz.sh's refusals and of its skip where clang++-14 is
missing (docs/fuzzing.md). The fuzzing itself runs in CI's smoke step and in
the long runs of docs/benchmarks.md, not here: none of these cases builds."""

import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "fuzz.sh")
BASH = shutil.which("bash")


def run(args, env=None):
    p = subprocess.run([BASH, SCRIPT] + args, capture_output=True, text=True, env=env,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


class FuzzScriptTest(unittest.TestCase):
    def test_refuses_bad_arguments(self):
        cases = [
            ([], "error: fuzz.sh: say --smoke, --seconds N or --runs N (--help)"),
            (["--fast"], "error: fuzz.sh: unknown option --fast"),
            (["--runs", "0"], "error: fuzz.sh: --runs 0 is not a positive integer"),
            (["--seconds", "ten"], "error: fuzz.sh: --seconds ten is not a positive integer"),
            (["--seconds", "5", "graph_json", "yaml"],
             "error: fuzz.sh: unknown target yaml (graph_json job_yaml cluster_yaml chakra_et "
             "kineto_json memory_snapshot capture_file wire_frames tcpstore)"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                rc, out = run(args)
                self.assertEqual(rc, 2, out)
                self.assertEqual(out.strip(), message)

    def test_skips_without_clang(self):
        # A PATH holding only the tools the script needs before its probe:
        # no clang++-14, so the fuzz build is skipped, with one line, exit 0.
        with tempfile.TemporaryDirectory() as d:
            for tool in ["dirname", "grep", "mktemp", "rm"]:
                os.symlink(shutil.which(tool), os.path.join(d, tool))
            rc, out = run(["--smoke"], env={"PATH": d})
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), "fuzz: skipped: clang++-14 with libFuzzer (Debian: "
                         "clang-14, libclang-rt-14-dev) is not installed")


if __name__ == "__main__":
    unittest.main()
