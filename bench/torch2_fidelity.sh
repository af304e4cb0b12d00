#!/usr/bin/env bash
# All-real against hybrid for the 3-D Llama (issue 22, "Fidelity and
# performance"; docs/validation.md, "All-real against hybrid on PyTorch
# 2.x"): examples/llama_3d/train.py as bench/jobs/llama-3d-WORLD.yaml, two
# pipeline stages (--pp 2 --tp TP; dp is what the world leaves). WORLD=2
# (the default, TP=1) is the largest world whose every rank runs for real on
# the 2-core VM; WORLD=8 TP=2 (pp 2 x dp 2 x tp 2) is for a host of 9 cores
# or more. Each pair runs it twice under `prism emulate` through the c10d
# backend (torch 2.x), the two in turn:
#   all-real  --real-ranks 0,...,WORLD-1: every rank real, the network
#             emulated;
#   hybrid    --real-ranks 0: rank 0 real against the others emulated from
#             the captures of their roles.
# Both capture the roles first, CAPTURE_JOBS (2) side by side, as the slices
# experiment's better side did (bench/slices_fidelity.sh). Every process of
# rank r (capture or real) runs on the r-th physical core (one hardware thread
# of each core first: bench/cpu_time.py pins it and records its CPU) and has
# one torch thread. Odd pairs run all-real
# first, even pairs hybrid first. GLOO=1 adds a third run to each pair,
# last: every rank real on plain Gloo, no PrismLLM (as
# bench/slices_fidelity_real.sh), rank 0's figure the median of the step
# times the program prints past the same warm-up.
#
# RESULTS=DIR keeps the runs' files in DIR (KEEP=1: in a kept temporary
# directory), and each pair's unfiltered figures (and each run's wall time,
# captures included) are printed as it ends, so a run cut short by a host's
# time limit still shows them.
#
# The figure of a run is the median of the real rank 0's iteration times
# (`iteration_times_s` in the report) past the first WARMUP steps, as in
# bench/slices_fidelity.sh; the error of a pair is hybrid / all-real - 1.
# A run counts as clean, as there, when each process that made its figure
# ran at full speed: its CPU (user + system) within CLEAN_PCT percent of the
# lowest that process had over all runs of its side. All-real, that is every
# real rank; hybrid, the real rank 0 and the captures the emulated ranks
# replay. (This program prints no CPU per step; a process's whole CPU counts
# its Gloo-free backend threads too.) The script prints every pair with the
# 1-minute load average at its start, then the median, p10, p90 and largest
# of the paired errors over the pairs clean on both sides and over all
# pairs, and where the real rank 0's iterations went on each side (its
# compute and its waits, from the reports) beside the graph's prediction.
#
#   bench/torch2_fidelity.sh [PAIRS] [BUILD_DIR] [-- extra train.py args]
#   PYTHON=/work/main/.venv/bin/python STEPS=12 WARMUP=2 bench/torch2_fidelity.sh 30
#   WORLD=8 TP=2 CAPTURE_JOBS=8 PYTHON=python3 bench/torch2_fidelity.sh 30 build/gpu-bundle
set -euo pipefail
pairs=${1:-5}
build=${2:-build}
shift $(($# < 2 ? $# : 2))
[[ $# -gt 0 && $1 == -- ]] && shift
steps=${STEPS:-12} warmup=${WARMUP:-2}
((warmup >= 1 && steps > warmup)) || {
  echo "error: need 1 <= WARMUP < STEPS (WARMUP=$warmup STEPS=$steps)" >&2
  exit 2
}
world=${WORLD:-2} tp=${TP:-1}
job=bench/jobs/llama-3d-$world.yaml
[[ -f $job ]] || { echo "error: no job $job for WORLD=$world (bench/jobs has llama-3d-2 and -8)" >&2; exit 2; }
((world % (2 * tp) == 0)) || { echo "error: WORLD=$world is not a multiple of pp 2 x TP=$tp" >&2; exit 2; }
py=${PYTHON:-.venv/bin/python}
[[ -x $py ]] || {
  echo "error: PYTHON=$py is not an interpreter (torch 2.x; scripts/setup.sh makes .venv)" >&2
  exit 2
}
if [[ -n ${RESULTS:-} ]]; then
  out=$RESULTS
  mkdir -p "$out"
else
  out=$(mktemp -d)
  [[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT
fi
args=(--pp 2 --tp "$tp" --steps "$steps" "$@")

# Each rank pins itself to the core of its number, one torch thread, and
# appends its CPU time to $CPU_FILE: captures first, then the real ranks.
program=(sh -c 'exec "$0" -S -E bench/cpu_time.py "$CPU_FILE" "rank $RANK" "$RANK" -- "$0" "$@"'
  "$py" examples/llama_3d/train.py "${args[@]}")
all=$(seq -s, 0 $((world - 1)))
run() { # side pair
  local side=$1 pair=$2 ranks=0
  [[ $side == real ]] && ranks=$all
  awk '{print $1}' /proc/loadavg >"$out/$side$pair.load"
  local start=$EPOCHREALTIME
  CPU_FILE=$out/$side$pair.cpu OMP_NUM_THREADS=1 "$build/bin/prism" emulate "$job" \
    --real-ranks $ranks --master-port 0 --capture-jobs "${CAPTURE_JOBS:-2}" --report "$out/$side$pair.json" \
    -- "${program[@]}" >"$out/$side$pair.out" 2>&1 || {
    cat "$out/$side$pair.out"
    exit 1
  }
  echo "$start $EPOCHREALTIME" >"$out/$side$pair.wall"
}
# Which CPUs the ranks get (one thread of each physical core first), and a
# warning where the world needs more physical cores than the host has.
cores=$("$py" -S -E bench/cpu_time.py --cores)
echo "host: $cores" >&2
physical=$(sed -E 's/.* on ([0-9]+) physical.*/\1/' <<<"$cores")
((world < physical)) || echo "warning: $world ranks and the coordinator on $physical physical cores: the all-real side shares cores" >&2
# DEADLINE_S: start no pair past that many seconds from now; the figures are
# then over the pairs that ran (the summary says how many), so a host lent
# for a fixed time still gives them.
deadline=$((SECONDS + ${DEADLINE_S:-999999}))
done_pairs=0
for pair in $(seq 1 "$pairs"); do
  if ((SECONDS >= deadline)); then
    echo "DEADLINE_S=${DEADLINE_S} passed: $done_pairs of $pairs pairs ran" >&2
    break
  fi
  echo "pair $pair of $pairs ($(date -u +%T)) ..." >&2
  if ((pair % 2)); then run real "$pair" && run hybrid "$pair"; else run hybrid "$pair" && run real "$pair"; fi
  if [[ ${GLOO:-0} == 1 ]]; then
    awk '{print $1}' /proc/loadavg >"$out/gloo$pair.load"
    port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    pids=()
    for rank in $(seq 0 $((world - 1))); do
      RANK=$rank WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
        CPU_FILE=$out/gloo$pair.cpu "${program[@]}" >"$out/gloo$pair.$rank.out" 2>&1 &
      pids+=($!)
    done
    for rank in $(seq 0 $((world - 1))); do
      wait "${pids[$rank]}" || {
        echo "error: pair $pair, plain Gloo: rank $rank failed; its output:" >&2
        cat "$out/gloo$pair.$rank.out" >&2
        exit 1
      }
    done
  fi
  done_pairs=$pair
  # The pair's figures now, unfiltered: a run cut short still shows them.
  "$py" - "$out" "$pair" "$warmup" <<'PY' >&2
import json, statistics, sys
out, pair, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3])
def ms(side):
    report = json.load(open(f"{out}/{side}{pair}.json"))
    rank0 = next(r for r in report["real_ranks"] if r["rank"] == 0)
    return statistics.median(rank0["iteration_times_s"][warmup - 1:]) * 1e3
def wall(side):  # the whole run, captures included, in s
    start, end = map(float, open(f"{out}/{side}{pair}.wall").read().split())
    return end - start
real, hybrid = ms("real"), ms("hybrid")
print(f"pair {pair}: all-real {real:.2f} ms, hybrid {hybrid:.2f} ms, error {100 * (hybrid / real - 1):+.2f}% "
      f"(runs of {wall('real'):.1f} s and {wall('hybrid'):.1f} s)")
PY
done
((done_pairs >= 1)) || { echo "error: no pair ran before DEADLINE_S=${DEADLINE_S}" >&2; exit 1; }

"$py" - "$out" "$done_pairs" "$warmup" "${CLEAN_PCT:-10}" "${GLOO:-0}" "$world" <<'PY'
import json, re, statistics, sys
out, pairs, warmup, clean_pct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
gloo, world = sys.argv[5] == "1", int(sys.argv[6])
sides = ("real", "hybrid")

def figure(side, i):
    report = json.load(open(f"{out}/{side}{i}.json"))
    rank0 = next(r for r in report["real_ranks"] if r["rank"] == 0)
    # N steps make N - 1 iterations, iteration k ending with step k + 1.
    times = rank0["iteration_times_s"][warmup - 1:]
    cpu = [(int(r), float(u) + float(s)) for r, u, s in
           re.findall(r"rank (\d+) cpu ([0-9.]+) ([0-9.]+)", open(f"{out}/{side}{i}.cpu").read())]
    # The captures (in the order they ended), then the real ranks.
    real = world if side == "real" else 1
    captures, reals = cpu[:len(cpu) - real], dict(cpu[len(cpu) - real:])
    if len(captures) < 2 or sorted(reals) != list(range(real)):
        sys.exit(f"error: pair {i}, {side}: CPU lines of captures {[r for r, _ in captures]} and "
                 f"real ranks {sorted(reals)}, expected at least 2 captures, then ranks 0-{real - 1}")
    if side == "real":
        made = {f"r{r}": c for r, c in reals.items()}  # every real rank
    else:  # the real rank 0 and every capture the emulated ranks replay
        made = {"r0": reals[0], **{f"c{r}": c for r, c in captures if r != 0 or world > 2}}
    return {"ms": statistics.median(times) * 1e3, "cpu": made, "n": len(times),
            "load": float(open(f"{out}/{side}{i}.load").read()),
            # The report's means over all its iterations, warm-up included.
            "compute": rank0["compute_s"] * 1e3, "wait": rank0["wait_s"] * 1e3,
            "mean": rank0["iteration_time_s"] * 1e3,
            "predicted": report["predicted_iteration_time_s"] * 1e3,
            # Every real rank's means: (compute, wait, the replay's prediction for it).
            "ranks": {r["rank"]: (r["compute_s"] * 1e3, r["wait_s"] * 1e3,
                                  r["predicted_iteration_time_s"] * 1e3)
                      for r in report["real_ranks"]}}

def plain(i):
    steps = [float(ms) for _, ms in re.findall(r"rank 0 stages \[0\] step (\d+): ([0-9.]+) ms",
                                               open(f"{out}/gloo{i}.0.out").read())]
    if len(steps) <= warmup:
        sys.exit(f"error: pair {i}, plain Gloo: rank 0 printed {len(steps)} steps")
    cpu = dict((f"r{r}", float(u) + float(s)) for r, u, s in
               re.findall(r"rank (\d+) cpu ([0-9.]+) ([0-9.]+)", open(f"{out}/gloo{i}.cpu").read()))
    return {"ms": statistics.median(steps[warmup:]), "cpu": cpu, "n": len(steps) - warmup,
            "load": float(open(f"{out}/gloo{i}.load").read())}

rows = [{side: figure(side, i) for side in sides} for i in range(1, pairs + 1)]
if gloo:
    sides += ("gloo",)
    for i, r in enumerate(rows, 1):
        r["gloo"] = plain(i)
lowest = {side: {k: min(r[side]["cpu"].get(k, float("inf")) for r in rows)
               for k in rows[0][side]["cpu"]} for side in sides}
for r in rows:
    for side in sides:
        r[side]["clean"] = all(c <= lowest[side].get(k, c) * (1 + clean_pct / 100)
                               for k, c in r[side]["cpu"].items())

def split(x):  # "r0/rest": rank 0's CPU, the rest's summed
    return f"{x['cpu']['r0']:>6.2f}/{sum(c for k, c in x['cpu'].items() if k != 'r0'):<7.2f}"

print(f"{'pair':>4} {'load':>5} {'all-real (ms)':>14} {'cpu r0/rest (s)':>15} "
      f"{'hybrid (ms)':>12} {'cpu r0/capt (s)':>15} {'error':>8}")
for i, r in enumerate(rows, 1):
    a, h = r["real"], r["hybrid"]
    print(f"{i:>4} {a['load']:>5.2f} {a['ms']:>13.2f}{' ' if a['clean'] else '*'} "
          f"{split(a)}  {h['ms']:>11.2f}{' ' if h['clean'] else '*'} "
          f"{split(h)}  {100 * (h['ms'] / a['ms'] - 1):>+7.2f}%"
          + (f"   gloo {r['gloo']['load']:>5.2f} {r['gloo']['ms']:>8.2f}{' ' if r['gloo']['clean'] else '*'}"
             f" {split(r['gloo'])}" if gloo else ""))
print(f"* a process slowed: its CPU over {clean_pct:g}% above its side's lowest "
      f"(all-real: rank 0 {lowest['real']['r0']:.2f} s; hybrid: rank 0 "
      f"{lowest['hybrid']['r0']:.2f} s); the CPU of rank 0 and of the rest (summed), in s; "
      f"{rows[0]['real']['n']} timed iterations a run")

def quantile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (k - lo)

for what, keep in (("pairs clean on both sides", True), ("all pairs", False)):
    sel = [r for r in rows if (r["real"]["clean"] and r["hybrid"]["clean"]) or not keep]
    if not sel:
        print(f"{what}: none")
        continue
    errors = [100 * (r["hybrid"]["ms"] / r["real"]["ms"] - 1) for r in sel]
    print(f"{what}: paired error median {statistics.median(errors):+.2f}% over {len(sel)} pairs, "
          f"p10 {quantile(errors, 0.1):+.2f}%, p90 {quantile(errors, 0.9):+.2f}%, "
          f"largest |error| {max(errors, key=abs):+.2f}%; medians all-real "
          f"{statistics.median(r['real']['ms'] for r in sel):.2f} ms, hybrid "
          f"{statistics.median(r['hybrid']['ms'] for r in sel):.2f} ms")
    # Where the difference lies: the real rank 0's compute and its waits.
    med = lambda side, k: statistics.median(r[side][k] for r in sel)
    print(f"{what}: rank 0 an iteration (the reports' means, warm-up included; medians over "
          f"pairs): all-real {med('real', 'mean'):.2f} ms (compute {med('real', 'compute'):.2f}, "
          f"wait {med('real', 'wait'):.2f}); hybrid {med('hybrid', 'mean'):.2f} ms (compute "
          f"{med('hybrid', 'compute'):.2f}, wait {med('hybrid', 'wait'):.2f}); the replay "
          f"without real ranks predicts {med('hybrid', 'predicted'):.2f} ms")
    if world > 1:  # every rank of the all-real side: which ones computed or waited more
        per = lambda k, i: statistics.median(r["real"]["ranks"][k][i] for r in sel)
        print(f"{what}: all-real, each rank's compute/wait (ms, medians over pairs; the replay "
              f"without real ranks predicts {med('real', 'predicted'):.2f} ms): "
              + ", ".join(f"r{k} {per(k, 0):.2f}/{per(k, 1):.2f}"
                          for k in sorted(rows[0]["real"]["ranks"])))
    if gloo:
        for side in ("real", "hybrid"):
            sel = [r for r in rows if (r[side]["clean"] and r["gloo"]["clean"]) or not keep]
            if sel:
                errors = [100 * (r[side]["ms"] / r["gloo"]["ms"] - 1) for r in sel]
                print(f"{what}: {side} against plain Gloo: paired error median "
                      f"{statistics.median(errors):+.2f}% over {len(sel)} pairs, p10 "
                      f"{quantile(errors, 0.1):+.2f}%, p90 {quantile(errors, 0.9):+.2f}%, largest "
                      f"|error| {max(errors, key=abs):+.2f}%; median plain Gloo "
                      f"{statistics.median(r['gloo']['ms'] for r in sel):.2f} ms")
PY
