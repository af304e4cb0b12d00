"""Runs a command pinned to one core and appends its CPU time to a file.

    python3 -S -E bench/cpu_time.py FILE LABEL CORE -- COMMAND [ARGS...]

The command runs on the CORE-th core this process may use (modulo their
number), and when it ends one line is appended to FILE:
"LABEL cpu USER SYSTEM wall SECONDS", the command's user and system CPU
(its own and its waited-for children's) and its wall time, in seconds.
The exit status is the command's (128 + N when signal N ended it); SIGTERM
and SIGINT are passed on to it. bench/torch2_fidelity.sh wraps every rank
in it: /usr/bin/time and taskset, which did this before, are not on every
host (a GPU host may lack GNU time). Run it with -S -E, so that the
sitecustomize a rank's PYTHONPATH names is not loaded here too.
"""

import os
import resource
import signal
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 6 or argv[4] != "--":
        sys.exit("usage: cpu_time.py FILE LABEL CORE -- COMMAND [ARGS...]")
    path, label, core, command = argv[1], argv[2], int(argv[3]), argv[5:]
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[core % len(cores)]})
    start = time.monotonic()
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _frame: child.send_signal(s))
    status = child.wait()
    wall = time.monotonic() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(path, "a") as f:
        f.write(f"{label} cpu {used.ru_utime:.2f} {used.ru_stime:.2f} wall {wall:.2f}\n")
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
