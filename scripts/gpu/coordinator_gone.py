"""The GPU check's (h): the coordinator gone while a real rank's stream is
held. Runs `prism emulate` with examples/cuda_gpt/train.py as a real rank
through the NCCL drop-in, kills `prism` (SIGKILL, so nothing of it says
goodbye) once the emulation proper has run a few steps, and times how long
the orphaned rank takes to end by itself: the drop-in must fail its
communicators and release every held stream, so that the program ends with
an error instead of a GPU stream waiting forever.

    coordinator_gone.py --prism BIN/prism --job JOB --dropin LIB/libnccl.so.2
        --out DIR [--python python3] [--rank 5] [--after-steps 3] [--within 90]
        [--device cuda] [--stacks-after 4] [-- extra train.py arguments]

Prints one line `GONE {json}`: killed_after_s (from the start), the step
the emulation had printed, rank_pid, rank_ended (bool), rank_ended_after_s
(after the kill), rank_exit (the wrapper's status file, if written),
rank_stderr_tail (the rank's own last stderr lines, written to
DIR/gone.rank.err by the rank itself, since prism's pipes die with it).
A rank still running --stacks-after seconds after the kill has its threads
(name, state, kernel wait channel) in `threads` and their native stacks by
cuda-gdb, where installed, in DIR/gone.stacks.txt. The drop-in ends a
process that outlives its coordinator by PRISM_NCCL_GONE_EXIT_S seconds
(10) with one error line and exit status 1 (docs/nccl-shim.md).
Exit status 0 when the rank ended within --within seconds, else 1 (the
rank is then killed). `--device cpu` runs the same on CPU through the c10d
backend (the mechanics only; for testing the script).
"""

import argparse
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for this purpose.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def descendants(pid):
    """pid's children, grandchildren, ... (from /proc/PID/task/*/children)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(x) for x in f.read().split()]
                found += kids
                todo += kids
        except OSError:
            pass
    return found


def look_inside(pid, out_dir):
    """The threads of the rank's processes still running (name, state,
    wchan), and their native stacks by cuda-gdb where it is installed (into
    gone.stacks.txt): where a rank that outlives its coordinator is stuck."""
    threads = []
    procs = [pid] + descendants(pid)
    for p in procs:
        try:
            tids = sorted(os.listdir("/proc/%d/task" % p), key=int)
        except OSError:
            continue
        for t in tids:
            base = "/proc/%d/task/%s/" % (p, t)
            try:
                name = open(base + "comm").read().strip()
                state = open(base + "stat").read().split(") ", 1)[1][0]
                wchan = open(base + "wchan").read().strip()
            except OSError:
                continue
            threads.append("%d/%s %s %s %s" % (p, t, name, state, wchan))
    gdb = shutil.which("cuda-gdb") or ("/usr/local/cuda/bin/cuda-gdb"
                                       if os.path.exists("/usr/local/cuda/bin/cuda-gdb") else None)
    stacks = os.path.join(out_dir, "gone.stacks.txt")
    with open(stacks, "w") as f:
        f.write("threads (pid/tid name state wchan):\n" + "\n".join(threads) + "\n")
        f.flush()
        for p in procs[1:] or procs:  # the program under the shell
            if gdb is None:
                f.write("no cuda-gdb: no native stacks\n")
                break
            f.write("\n== cuda-gdb -p %d: thread apply all bt\n" % p)
            f.flush()
            try:
                subprocess.run([gdb, "-p", str(p), "-batch", "-ex", "set pagination off",
                                "-ex", "thread apply all bt 25"], stdout=f, stderr=subprocess.STDOUT,
                               timeout=40)
            except (OSError, subprocess.SubprocessError) as e:
                f.write("cuda-gdb: %s\n" % e)
    return threads, "gone.stacks.txt"


def tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n")[:300] for line in f.readlines()[-n:]]
    except OSError:
        return []


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prism", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--dropin", default="", help="the NCCL drop-in (not used with --device cpu)")
    p.add_argument("--out", required=True)
    p.add_argument("--python", default="python3")
    p.add_argument("--rank", type=int, default=5)
    p.add_argument("--after-steps", type=int, default=3)
    p.add_argument("--within", type=float, default=90.0)
    p.add_argument("--timeout", type=int, default=60, help="prism emulate --timeout")
    p.add_argument("--device", default="cuda")
    p.add_argument("--stacks-after", type=float, default=4.0,
                   help="seconds after the kill: a rank still running then has its threads and "
                        "stacks written (gone.stacks.txt); 0: never")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    pid_file = os.path.join(a.out, "gone.rank.pid")
    err_file = os.path.join(a.out, "gone.rank.err")
    exit_file = os.path.join(a.out, "gone.rank.exit")
    for f in (pid_file, err_file, exit_file):
        if os.path.exists(f):
            os.remove(f)
    train = [a.python, "examples/cuda_gpt/train.py", "--parallel", "ddp", "--steps", "400",
             "--device", a.device] + extra
    env_args = ["env"]
    if a.device.startswith("cuda"):
        env_args += ["LD_PRELOAD=" + a.dropin, "PRISM_NCCL_DROPIN=1"]
    # The rank's shell records its pid, keeps its own stdout and stderr
    # (prism's pipes die with prism: a print there would end the rank with
    # a broken pipe instead of the drop-in's error) and its exit status.
    # Each run (capture, then emulation) removes the previous run's status.
    rank_cmd = ('rm -f %s; echo $$ > %s; "$@" > %s 2> %s; echo $? > %s'
                % (exit_file, pid_file, os.path.join(a.out, "gone.rank.out"), err_file, exit_file))
    cmd = [a.prism, "emulate", a.job, "--real-ranks", str(a.rank), "--timeout", str(a.timeout),
           "--no-verify-roles", "--", "sh", "-c", rank_cmd, "sh"] + env_args + train
    start = time.monotonic()
    log = open(os.path.join(a.out, "gone.prism.out"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    out = {"command": " ".join(cmd)}
    # The rank runs twice: captured, then emulated; each run writes its pid
    # anew. The emulation proper is the second pid; kill prism once that run
    # has printed step --after-steps.
    rank_out = os.path.join(a.out, "gone.rank.out")
    step_re = re.compile(r"^step (\d+)\b", re.M)
    pids, killed = [], False
    while proc.poll() is None and time.monotonic() - start < a.within + 2 * a.timeout:
        try:
            pid = int(open(pid_file).read().split()[0])
            if not pids or pids[-1] != pid:
                pids.append(pid)
        except (OSError, ValueError, IndexError):
            pass
        if len(pids) >= 2:
            try:
                steps = [int(x) for x in step_re.findall(open(rank_out, errors="replace").read())]
            except OSError:
                steps = []
            if steps and max(steps) >= a.after_steps:
                out["killed_after_s"] = round(time.monotonic() - start, 3)
                out["emulation_step"] = max(steps)
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        time.sleep(0.05)
    if not killed:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
        out["error"] = "prism emulate ended (status %s) before the emulation's step %d" % (
            proc.returncode, a.after_steps)
        out["prism_tail"] = tail(os.path.join(a.out, "gone.prism.out"))
        print("GONE " + json.dumps(out), flush=True)
        return 1
    proc.wait()
    log.close()
    killed_at = time.monotonic()
    pid = pids[-1]
    out["rank_pid"] = pid
    ended = False
    looked = False
    while pid is not None and time.monotonic() - killed_at < a.within:
        if not alive(pid):
            ended = True
            break
        if not looked and a.stacks_after > 0 and time.monotonic() - killed_at >= a.stacks_after:
            looked = True
            out["still_running_after_s"] = round(time.monotonic() - killed_at, 3)
            out["threads"], out["stacks_file"] = look_inside(pid, a.out)
        time.sleep(0.1)
    out["rank_ended"] = ended
    if ended:
        out["rank_ended_after_s"] = round(time.monotonic() - killed_at, 3)
    elif pid is not None:
        os.killpg(os.getpgid(pid), signal.SIGKILL) if alive(pid) else None
    try:
        out["rank_exit"] = int(open(exit_file).read().split()[0])
    except (OSError, ValueError, IndexError):
        out["rank_exit"] = None
    out["rank_stderr_tail"] = tail(err_file)
    print("GONE " + json.dumps(out), flush=True)
    return 0 if ended else 1


if __name__ == "__main__":
    sys.exit(main())
