"""Runs a command pinned to one core and appends its CPU time to a file.

    python3 -S -E bench/cpu_time.py FILE LABEL CORE -- COMMAND [ARGS...]

The command runs on the CORE-th CPU this process may use (modulo their
number), counting one hardware thread of each physical core first and the
cores' other threads after them, so ranks 0..N-1 get N physical cores of
their own when the host has them (CPUs r and r+1 may be two threads of one
core: on such a host pinning rank r to CPU r put two ranks on one core).
When the command ends one line is appended to FILE:
"LABEL cpu USER SYSTEM wall SECONDS", the command's user and system CPU
(its own and its waited-for children's) and its wall time, in seconds.
The exit status is the command's (128 + N when signal N ended it); SIGTERM
and SIGINT are passed on to it. bench/torch2_fidelity.sh wraps every rank
in it: /usr/bin/time and taskset, which did this before, are not on every
host (a GPU host may lack GNU time). Run it with -S -E, so that the
sitecustomize a rank's PYTHONPATH names is not loaded here too.

    python3 -S -E bench/cpu_time.py --cores

prints that order and how many physical cores it covers.
"""

import os
import resource
import signal
import subprocess
import sys
import time


SYSFS = "/sys/devices/system/cpu"


def cpu_order(allowed, sysfs=SYSFS):
    """The CPUs of `allowed`, one thread of each physical core first (in
    the order of their lowest thread), then the others; and the number of
    physical cores. Sorted, each CPU its own core, where sysfs does not say."""
    cores = {}
    for cpu in sorted(allowed):
        try:
            topo = os.path.join(sysfs, f"cpu{cpu}", "topology")
            key = tuple(open(os.path.join(topo, f)).read().strip()
                        for f in ("physical_package_id", "core_id"))
        except OSError:
            key = ("cpu", str(cpu))
        cores.setdefault(key, []).append(cpu)
    threads = sorted(cores.values())
    first = [t[0] for t in threads]
    rest = sorted(c for t in threads for c in t[1:])
    return first + rest, len(threads)


def main(argv):
    if argv[1:] == ["--cores"]:
        order, physical = cpu_order(os.sched_getaffinity(0))
        print(f"{len(order)} CPUs on {physical} physical cores; rank r runs on CPU "
              f"{','.join(map(str, order))}[r]")
        return 0
    if len(argv) < 6 or argv[4] != "--":
        sys.exit("usage: cpu_time.py FILE LABEL CORE -- COMMAND [ARGS...]")
    path, label, core, command = argv[1], argv[2], int(argv[3]), argv[5:]
    cores, _ = cpu_order(os.sched_getaffinity(0))
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
