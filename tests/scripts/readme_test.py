"""The README says what the program does today (issue 25, item 7): its
quick-start command runs and prints what the README's output block shows
(numbers with a fraction or a percent sign aside: they are timings), the
commands it names inline run, and every option of its command list is one
that `prism <command> --help` knows.

Environment: PRISM_BUILD_DIR, the CMake build folder (default: build).
The quick start needs the repository's .venv (scripts/setup.sh) and the c10d
backend; without them that test is skipped, saying why.
"""

import os
import re
import shlex
import subprocess
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PRISM_BUILD_DIR", os.path.join(REPO, "build"))
PRISM = os.path.join(BUILD, "bin", "prism")


def readme():
    with open(os.path.join(REPO, "README.md")) as f:
        return f.read()


def blocks(text):
    """(info string, body, end offset) of every fenced block, in order."""
    out = []
    for m in re.finditer(r"^```([^\n]*)\n(.*?)^```$", text, re.M | re.S):
        out.append((m.group(1).strip(), m.group(2), m.end()))
    return out


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=REPO, **kw)


def line_pattern(line):
    """A README output line as a regex: numbers with a fraction or a percent
    sign (timings) match any such number; everything else is literal (a
    capture's op counts included: they follow from the program)."""
    parts = re.split(r"([+-]?\d+\.\d+%?|[+-]?\d+%)", line)
    rx = ""
    for i, p in enumerate(parts):
        rx += r"[+-]?\d+(?:\.\d+)?%?" if i % 2 else re.escape(p)
    return re.compile("^" + rx + "$")


def matches(expected, actual):
    """Whether `actual` lines hold `expected`'s in order, "..." standing for
    any number of lines (none included); otherwise the first line not
    found."""
    lines = actual.splitlines()
    at = 0
    gap = False
    for want in expected.splitlines():
        if want.strip() == "...":
            gap = True
            continue
        rx = line_pattern(want)
        while at < len(lines) and not rx.match(lines[at]):
            if not gap:
                return want
            at += 1
        if at == len(lines):
            return want
        at += 1
        gap = False
    return None


class ReadmeTest(unittest.TestCase):
    def test_the_quick_start_prints_what_the_readme_shows(self):
        text = readme()
        found = [(i, b) for i, b in enumerate(blocks(text))
                 if b[0] == "sh" and "prism emulate examples/jobs/ddp-gpt-64.yaml" in b[1]]
        self.assertTrue(found, "the README's quick start (prism emulate of ddp-gpt-64) is gone")
        i, (_, body, _) = found[0]
        command = body.strip().split("&&")[-1].strip()
        args = shlex.split(command)
        self.assertEqual(args[0], "./build/bin/prism", command)
        args[0] = PRISM
        if not os.access(os.path.join(REPO, args[-2]), os.X_OK):
            self.skipTest("no %s (scripts/setup.sh makes it)" % args[-2])
        expected = blocks(text)[i + 1][1]
        # One pipe for both streams: the lines in the order a terminal shows.
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600, cwd=REPO)
        self.assertEqual(r.returncode, 0, r.stdout)
        missing = matches(expected, r.stdout)
        self.assertIsNone(missing, "the README's line\n  %s\nis not in what the command printed:\n%s"
                          % (missing, r.stdout))

    def test_the_commands_it_names_inline_run(self):
        for command in re.findall(r"`\./build/bin/prism ([^`]+)`", readme()):
            r = run([PRISM] + shlex.split(command))
            self.assertEqual(r.returncode, 0, "prism %s: %s" % (command, r.stderr))

    def test_every_option_of_the_command_list_exists(self):
        text = readme()
        section = text[text.index("## Commands"):]
        body = blocks(section)[0][1]
        helps = {}
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if not line.startswith("prism "):
                continue
            words = shlex.split(line.split(" -- ", 1)[0])  # the program after -- is not prism's
            sub = words[1:2]
            if words[1] in ("memory", "import", "export"):
                sub = words[1:3]
            key = " ".join(sub)
            if key not in helps:
                r = run([PRISM] + sub + ["--help"])
                self.assertEqual(r.returncode, 0, "prism %s --help: %s" % (key, r.stderr))
                helps[key] = r.stdout
            for w in words[1 + len(sub):]:
                if w.startswith("-") and not re.match(r"^-\d", w):
                    opt = w.split("=", 1)[0]
                    self.assertRegex(helps[key], r"(^|[\s,])%s([\s,=]|$)" % re.escape(opt),
                                     "README: `%s`: prism %s has no option %s" % (line, key, opt))


if __name__ == "__main__":
    unittest.main(verbosity=2)
