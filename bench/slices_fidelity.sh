#!/usr/bin/env bash
# The slicing experiment of docs/validation.md ("Slices against all-real
# ranks"): examples/pipeline_gpt/train.py, 2 ranks in 2 pipeline stages, run
# RUNS times all-real (bench/slices_fidelity_real.sh: both ranks real
# processes talking Gloo, no PrismLLM) and, interleaved with those runs,
# emulated: `prism emulate` captures rank 0 (stage 0) and rank 1 (stage 1)
# one after the other, builds the graph from the two slices, and runs rank 0
# for real against the emulated rank 1. Each rank (and the emulated program)
# is pinned to a core, as the all-real script does.
#
# The figures are medians over a run's timed steps (the first WARMUP steps
# left out on both sides): rank 0's own step time all-real, the report's
# iteration times emulated. A run counts as clean when each stage that made
# its figure ran at full speed: the stage's median cpu per step (the program
# prints it) within CLEAN_PCT percent of that stage's lowest over all runs of
# both sides. All-real, that is both ranks; emulated, the real rank 0 and the
# capture of stage 1 that the emulated rank 1 replays. On a VM whose host at
# times takes a core away, the guest counts the lost time as run, so a slowed
# core shows as more cpu for the same work. The script prints every run, then
# the medians over the clean runs and over all runs.
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

for run in $(seq 1 "$runs"); do
  echo "pair $run of $runs ..." >&2
  bench/slices_fidelity_real.sh 1 -- "${args[@]}" >"$out/real$run" 2>&1 ||
    {
      cat "$out/real$run"
      exit 1
    }
  "$build/bin/prism" emulate examples/jobs/pipeline-gpt-2.yaml --real-ranks 0 --master-port 0 \
    --report "$out/emu$run.json" -- taskset -c 0 /usr/bin/python3 examples/pipeline_gpt/train.py \
    "${args[@]}" >"$out/emu$run" 2>&1 || {
    cat "$out/emu$run"
    exit 1
  }
done

/usr/bin/python3 - "$out" "$runs" "$warmup" "${CLEAN_PCT:-10}" <<'PY'
import json, re, statistics, sys
out, runs, warmup, clean_pct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
line = re.compile(r"rank (\d) stage \d: \d+ steps, .* median step ([0-9.]+) ms, median cpu ([0-9.]+) ms")

def lines(path):
    return [(int(r), float(step), float(cpu)) for r, step, cpu in line.findall(open(path).read())]

rows = []
for i in range(1, runs + 1):
    real = {r: (step, cpu) for r, step, cpu in lines(f"{out}/real{i}")}
    # The emulated run's program prints: rank 0's capture, rank 1's, then the real rank 0.
    emu = lines(f"{out}/emu{i}")
    if [r for r, _, _ in emu] != [0, 1, 0] or sorted(real) != [0, 1]:
        sys.exit(f"error: pair {i}: the runs' output lacks a rank's last line")
    # N steps make N - 1 iterations, iteration k ending with step k + 1.
    times = json.load(open(f"{out}/emu{i}.json"))["real_ranks"][0]["iteration_times_s"][warmup - 1:]
    rows.append({"real": real[0][0], "emu": statistics.median(times) * 1e3,
                 "real_cpu": (real[0][1], real[1][1]), "emu_cpu": (emu[2][2], emu[1][2])})

fastest = [min(min(r["real_cpu"][s], r["emu_cpu"][s]) for r in rows) for s in (0, 1)]
def clean(cpus):
    return all(c <= f * (1 + clean_pct / 100) for c, f in zip(cpus, fastest))

print(f"{'pair':>4} {'all-real (ms)':>14} {'cpu s0/s1':>13} {'emulated (ms)':>14} {'cpu s0/s1':>13} {'error':>8}")
for i, r in enumerate(rows, 1):
    r["real_clean"], r["emu_clean"] = clean(r["real_cpu"]), clean(r["emu_cpu"])
    mark = lambda ok: " " if ok else "*"
    print(f"{i:>4} {r['real']:>14.3f}{mark(r['real_clean'])} {r['real_cpu'][0]:>6.1f}/{r['real_cpu'][1]:<6.1f}"
          f"{r['emu']:>14.3f}{mark(r['emu_clean'])} {r['emu_cpu'][0]:>6.1f}/{r['emu_cpu'][1]:<6.1f}"
          f"{100 * (r['emu'] / r['real'] - 1):>+7.2f}%")
print(f"* a core slowed: a stage's median cpu over {clean_pct:g}% above its lowest "
      f"(stage 0 {fastest[0]:.1f} ms, stage 1 {fastest[1]:.1f} ms)")
for what, keep in (("clean runs", True), ("all runs", False)):
    real = [r["real"] for r in rows if r["real_clean"] or not keep]
    emu = [r["emu"] for r in rows if r["emu_clean"] or not keep]
    if not real or not emu:
        print(f"{what}: none on one side"); continue
    m_r, m_e = statistics.median(real), statistics.median(emu)
    print(f"{what}: all-real {m_r:.3f} ms (median of {len(real)}), emulated {m_e:.3f} ms "
          f"(median of {len(emu)}): error {100 * (m_e / m_r - 1):+.2f}%")
PY
