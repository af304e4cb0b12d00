#!/usr/bin/env python3
"""Real ranks on other hosts (prism emulate --external-ranks), with three
"hosts" made of network namespaces on this machine: the coordinator in C
(10.77.1.1 and 10.77.2.1), rank 0 in A (10.77.1.2) and rank 3 in B
(10.77.2.2, which reaches 10.77.1.1 through C). The ranks are rank_player
processes started by this script, as another host's launcher would start
them, with the environment of --rank-env. Making namespaces needs root (or
CAP_NET_ADMIN) and `ip`: without them the test says why and is skipped
(exit 77).

    external_ranks_netns_test.py   (PRISM_BUILD_DIR: the build tree)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PRISM_BUILD_DIR", os.path.join(REPO, "build"))
PRISM = os.path.join(BUILD, "bin", "prism")
PLAYER = os.path.join(BUILD, "bin", "rank_player")
JOB = os.path.join(REPO, "tests", "cli", "data", "job_small.yaml")
SKIP = 77

TAG = "p%d" % (os.getpid() % 100000)
NS = {"c": TAG + "c", "a": TAG + "a", "b": TAG + "b"}


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=check)


def make_hosts():
    """The three namespaces and their links; raises CalledProcessError."""
    for ns in NS.values():
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    for peer, net in (("a", 1), ("b", 2)):
        here, there = TAG + peer + "0", TAG + peer + "1"
        sh("ip", "link", "add", here, "netns", NS["c"], "type", "veth", "peer", "name", there,
           "netns", NS[peer])
        sh("ip", "-n", NS["c"], "addr", "add", "10.77.%d.1/24" % net, "dev", here)
        sh("ip", "-n", NS[peer], "addr", "add", "10.77.%d.2/24" % net, "dev", there)
        sh("ip", "-n", NS["c"], "link", "set", here, "up")
        sh("ip", "-n", NS[peer], "link", "set", there, "up")
    # B reaches the coordinator's 10.77.1.1 through C, which holds it.
    sh("ip", "-n", NS["b"], "route", "add", "10.77.1.0/24", "via", "10.77.2.1")


def remove_hosts():
    for ns in NS.values():
        sh("ip", "netns", "delete", ns, check=False)


def in_ns(host, args, env=None, **kw):
    return subprocess.Popen(["ip", "netns", "exec", NS[host]] + args, env=env, text=True, **kw)


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            env[k] = v
    return env


class ExternalRanksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="external_ranks_test.")
        graph = os.path.join(cls.tmp.name, "graph.json")
        subprocess.run([PRISM, "build", JOB, "-o", graph], check=True, capture_output=True)
        cls.graph = graph

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def emulate(self, ranks, timeout, report=None):
        env_file = tempfile.mktemp(suffix=".env", dir=self.tmp.name)  # a new one per run
        args = [PRISM, "emulate", JOB, "--real-ranks", ranks, "--external-ranks",
                "--listen", "tcp:10.77.1.1:0", "--master-port", "0", "--rank-env", env_file,
                "--graph", self.graph, "--timeout", str(timeout)]
        if report:
            args += ["--report", report]
        coord = in_ns("c", args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(400):
            if os.path.exists(env_file) or coord.poll() is not None:
                break
            time.sleep(0.05)
        return coord, env_file

    def player(self, host, rank, env):
        e = dict(os.environ, **env, RANK=str(rank), LOCAL_RANK=str(rank % 8))
        return in_ns(host, [PLAYER], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def test_ranks_on_two_other_hosts_run_against_the_coordinator_on_a_third(self):
        report = os.path.join(self.tmp.name, "report.json")
        coord, env_file = self.emulate("0,3", 60, report)
        self.assertTrue(os.path.exists(env_file),
                        coord.communicate()[1] if coord.poll() is not None else "no --rank-env")
        env = read_env(env_file)
        self.assertTrue(env["PRISM_COORDINATOR"].startswith("tcp:10.77.1.1:"), env)
        self.assertEqual(env["MASTER_ADDR"], "10.77.1.1")
        players = [self.player("a", 0, env), self.player("b", 3, env)]
        outs = [p.communicate(timeout=60)[0] for p in players]
        out, err = coord.communicate(timeout=60)
        for p, o in zip(players, outs):
            self.assertEqual(p.returncode, 0, o)
        self.assertEqual(coord.returncode, 0, out + err)
        with open(report) as f:
            r = json.load(f)
        self.assertEqual([x["rank"] for x in r["real_ranks"]], [0, 3])
        for x in r["real_ranks"]:
            self.assertGreater(x["ops"], 0)
            self.assertEqual(x["ops"], x["graph_ops"])
        self.assertTrue(r["host"]["external_ranks"])
        self.assertFalse(r["host"]["oversubscribed"])

    def test_a_rank_that_never_comes_is_named(self):
        coord, env_file = self.emulate("0,3", 3)
        env = read_env(env_file)
        player = self.player("a", 0, env)  # rank 3's host never starts it
        out, err = coord.communicate(timeout=60)
        player.communicate(timeout=60)
        self.assertEqual(coord.returncode, 1, out + err)
        self.assertIn("live rank 3 did not connect within 3 s", err)


def main():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("skipped: making network namespaces needs root and `ip` (iproute2)")
        return SKIP
    try:
        remove_hosts()
        make_hosts()
    except (subprocess.CalledProcessError, OSError) as e:
        remove_hosts()
        why = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
        print("skipped: network namespaces cannot be made here: %s" % why)
        return SKIP
    try:
        r = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
        return 0 if r.wasSuccessful() else 1
    finally:
        remove_hosts()


if __name__ == "__main__":
    sys.exit(main())
