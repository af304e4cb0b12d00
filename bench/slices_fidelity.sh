#!/usr/bin/env bash
# The slicing experiment of docs/validation.md ("Slices against all-real
# ranks"): examples/pipeline_gpt/train.py, 2 ranks in 2 pipeline stages, run
# RUNS times each of three ways, interleaved:
#   all-real     bench/slices_fidelity_real.sh: both ranks real processes
#                talking Gloo, no PrismLLM;
#   one-by-one   `prism emulate` captures rank 0 (stage 0), then rank 1
#                (stage 1), builds the graph from the two slices, and runs
#                rank 0 for real against the emulated rank 1;
#   side-by-side the same with --capture-jobs 2: the two captures run at
#                once, each beside the other as the all-real ranks run.
# Rank r (real, or captured) is pinned to core r, as the all-real script does.
#
# The figures are medians over a run's timed steps (the first WARMUP steps
# left out on both sides): rank 0's own step time all-real, the report's
# iteration times emulated. A run counts as clean when each stage that made
# its figure ran at full speed: the stage's median cpu per step (the program
# prints it) within CLEAN_PCT percent of that stage's lowest over all runs.
# All-real, that is both ranks; emulated, the real rank 0 and the capture of
# stage 1 that the emulated rank 1 replays. On a VM whose host at times
# takes a core away, the guest counts the lost time as run, so a slowed core
# shows as more cpu for the same work. The script prints every run, then the
# medians over the clean runs and over all runs, and the median of each
# run's own error over the runs whose two figures are both clean.
#
#   bench/slices_fidelity.sh [RUNS] [BUILD_DIR] [-- extra train.py args]
#   STEPS=12 WARMUP=2 CLEAN_PCT=10 bench/slices_fidelity.sh 30
set -euo pipefail
runs=${1:-5}
build=${2:-build}
shift $(($# < 2 ? $# : 2))
[[ $# -gt 0 && $1 == -- ]] && shift
steps=${STEPS:-12} warmup=${WARMUP:-2}
((warmup >= 1 && steps > warmup)) || {
  echo "error: need 1 <= WARMUP < STEPS (WARMUP=$warmup STEPS=$steps)" >&2
  exit 2
}
args=(--steps "$steps" --warmup "$warmup" "$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Each rank pins itself to the core of its number.
program=(sh -c 'exec taskset -c "$RANK" /usr/bin/python3 examples/pipeline_gpt/train.py "$@"' sh
  "${args[@]}")
for run in $(seq 1 "$runs"); do
  echo "run $run of $runs ..." >&2
  bench/slices_fidelity_real.sh 1 -- "${args[@]}" >"$out/real$run" 2>&1 ||
    {
      cat "$out/real$run"
      exit 1
    }
  for jobs in 1 2; do
    "$build/bin/prism" emulate examples/jobs/pipeline-gpt-2.yaml --real-ranks 0 --master-port 0 \
      --capture-jobs $jobs --report "$out/emu$jobs.$run.json" -- "${program[@]}" \
      >"$out/emu$jobs.$run" 2>&1 || {
      cat "$out/emu$jobs.$run"
      exit 1
    }
  done
done

/usr/bin/python3 - "$out" "$runs" "$warmup" "${CLEAN_PCT:-10}" <<'PY'
import json, re, statistics, sys
out, runs, warmup, clean_pct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
line = re.compile(r"rank (\d) stage \d: \d+ steps, .* median step ([0-9.]+) ms, median cpu ([0-9.]+) ms")
sides = ("all-real", "one-by-one", "side-by-side")

def lines(path):
    return [(int(r), float(step), float(cpu)) for r, step, cpu in line.findall(open(path).read())]

def emulated(i, jobs):
    # The program prints the two captures' last lines (side by side, in
    # either order), then the real rank 0's.
    emu = lines(f"{out}/emu{jobs}.{i}")
    if len(emu) != 3 or sorted(r for r, _, _ in emu[:2]) != [0, 1] or emu[2][0] != 0:
        sys.exit(f"error: run {i}, --capture-jobs {jobs}: the output lacks a rank's last line")
    # N steps make N - 1 iterations, iteration k ending with step k + 1.
    report = json.load(open(f"{out}/emu{jobs}.{i}.json"))
    times = report["real_ranks"][0]["iteration_times_s"][warmup - 1:]
    stage1 = next(cpu for r, _, cpu in emu[:2] if r == 1)
    return {"ms": statistics.median(times) * 1e3, "cpu": (emu[2][2], stage1)}

rows = []
for i in range(1, runs + 1):
    real = {r: (step, cpu) for r, step, cpu in lines(f"{out}/real{i}")}
    if sorted(real) != [0, 1]:
        sys.exit(f"error: run {i}, all-real: the output lacks a rank's last line")
    rows.append({"all-real": {"ms": real[0][0], "cpu": (real[0][1], real[1][1])},
                 "one-by-one": emulated(i, 1), "side-by-side": emulated(i, 2)})

fastest = [min(r[side]["cpu"][s] for r in rows for side in sides) for s in (0, 1)]
for r in rows:
    for side in sides:
        r[side]["clean"] = all(c <= f * (1 + clean_pct / 100)
                               for c, f in zip(r[side]["cpu"], fastest))

print(f"{'run':>3}" + "".join(f" {side + ' (ms)':>19} {'cpu s0/s1':>13}" for side in sides)
      + f" {'error 1-by-1':>12} {'side-by-side':>12}")
for i, r in enumerate(rows, 1):
    cells = "".join(f" {r[side]['ms']:>18.3f}{' ' if r[side]['clean'] else '*'}"
                    f" {r[side]['cpu'][0]:>6.1f}/{r[side]['cpu'][1]:<6.1f}" for side in sides)
    errors = "".join(f" {100 * (r[side]['ms'] / r['all-real']['ms'] - 1):>+11.2f}%"
                     for side in sides[1:])
    print(f"{i:>3}{cells}{errors}")
print(f"* a core slowed: a stage's median cpu over {clean_pct:g}% above its lowest "
      f"(stage 0 {fastest[0]:.1f} ms, stage 1 {fastest[1]:.1f} ms)")
for what, keep in (("clean runs", True), ("all runs", False)):
    medians = {}
    for side in sides:
        ms = [r[side]["ms"] for r in rows if r[side]["clean"] or not keep]
        cpu = [r[side]["cpu"] for r in rows if r[side]["clean"] or not keep]
        if ms:
            medians[side] = statistics.median(ms)
            print(f"{what}: {side:<12} {medians[side]:9.3f} ms (median of {len(ms):>2}); median cpu "
                  f"stage 0 {statistics.median(c[0] for c in cpu):.1f} ms, "
                  f"stage 1 {statistics.median(c[1] for c in cpu):.1f} ms")
        else:
            print(f"{what}: {side:<12} none")
    for side in sides[1:]:
        if side in medians and "all-real" in medians:
            print(f"{what}: {side} error {100 * (medians[side] / medians['all-real'] - 1):+.2f}%")
# Each run's own pair, where both of it are clean: the all-real and emulated
# figures then come from minutes apart.
for side in sides[1:]:
    errors = [100 * (r[side]["ms"] / r["all-real"]["ms"] - 1) for r in rows
              if r[side]["clean"] and r["all-real"]["clean"]]
    if errors:
        print(f"runs clean on both sides: {side} error median {statistics.median(errors):+.2f}% "
              f"over {len(errors)} runs (from {min(errors):+.2f}% to {max(errors):+.2f}%)")
    else:
        print(f"runs clean on both sides: {side}: none")
PY
