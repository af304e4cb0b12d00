#!/usr/bin/env bash
# The slicing experiment of docs/validation.md ("Slices against all-real
# ranks"): examples/pipeline_gpt/train.py, 2 ranks in 2 pipeline stages, run
# RUNS times all-real (bench/slices_fidelity_real.sh: both ranks real
# processes talking Gloo, no PrismLLM) and, interleaved with those runs,
# emulated: `prism emulate` captures rank 0 (stage 0) and rank 1 (stage 1)
# one after the other, builds the graph from the two slices, and runs rank 0
# for real against the emulated rank 1. Compares rank 0's mean step time of
# each all-real run with the emulated iteration time of the next emulated
# run, and prints the medians. Each rank (and the emulated program) is pinned
# to a core, as the all-real script does.
#
#   bench/slices_fidelity.sh [RUNS] [BUILD_DIR] [-- extra train.py args]
set -euo pipefail
runs=${1:-5}
build=${2:-build}
shift $(( $# < 2 ? $# : 2 ))
[[ $# -gt 0 && $1 == -- ]] && shift
args=(--steps 8 --warmup 1 "$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for run in $(seq 1 "$runs"); do
  bench/slices_fidelity_real.sh 1 -- "${args[@]}" >"$out/real$run" 2>&1 \
    || { cat "$out/real$run"; exit 1; }
  "$build/bin/prism" emulate examples/jobs/pipeline-gpt-2.yaml --real-ranks 0 --master-port 0 \
    --report "$out/emu$run.json" -- taskset -c 0 /usr/bin/python3 examples/pipeline_gpt/train.py \
    "${args[@]}" >"$out/emu$run" 2>&1 || { cat "$out/emu$run"; exit 1; }
done

/usr/bin/python3 - "$out" "$runs" <<'PY'
import json, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
print(f"{'run':>3} {'all-real (ms)':>14} {'emulated (ms)':>14} {'error':>8}")
real, emu, err = [], [], []
for i in range(1, runs + 1):
    text = open(f"{out}/real{i}").read()
    r = float(re.search(r"rank 0 stage 0: \d+ steps, mean step ([0-9.]+) ms", text).group(1))
    e = json.load(open(f"{out}/emu{i}.json"))["real_ranks"][0]["iteration_time_s"] * 1e3
    real.append(r); emu.append(e); err.append(e / r - 1)
    print(f"{i:>3} {r:>14.3f} {e:>14.3f} {100 * (e / r - 1):>+7.2f}%")
m_r, m_e = statistics.median(real), statistics.median(emu)
print(f"median: all-real {m_r:.3f} ms, emulated {m_e:.3f} ms: {100 * (m_e / m_r - 1):+.2f}% "
      f"(median of the runs' errors {100 * statistics.median(err):+.2f}%)")
PY
