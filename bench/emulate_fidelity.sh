#!/bin/sh
# The fidelity experiment of docs/validation.md ("Hybrid emulation"): one
# live rank_player rank at a time in jobs of 64 to 8,192 ranks, its emulated
# iteration time against the pure replay's for the same rank, and the
# player's own overhead (time it spent between waits, which its virtual time
# includes). Prints one line per run.
#
#   bench/emulate_fidelity.sh [BUILD_DIR]
set -eu
build=${1:-build}
prism=$build/bin/prism
player=$build/bin/rank_player
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # name ranks job [--set ...]
  name=$1 ranks=$2 job=$3
  shift 3
  "$prism" emulate "$job" "$@" --real-ranks "$ranks" --report "$out/r.json" -- "$player" \
    >"$out/stdout" 2>"$out/stderr" || { cat "$out/stderr"; return 1; }
  python3 - "$name" "$out/r.json" "$out/stdout" <<'PY'
import json, re, sys
name, report, stdout = sys.argv[1:]
r = json.load(open(report))
over = {int(m.group(1)): float(m.group(2)) for m in re.finditer(
    r"rank (\d+): done .* player overhead ([0-9.]+) ms", open(stdout).read())}
for x in r["real_ranks"]:
    p, e = x["predicted_iteration_time_s"], x["iteration_time_s"]
    o = over.get(x["rank"], float("nan")) / 1e3
    print(f"{name:<28} {r['world_size']:>5} {x['rank']:>5} {p:>10.6f} {e:>10.6f} "
          f"{(e / p - 1) * 100:>+7.3f}% {o * 1e3:>8.3f} {(e - p - o) / p * 100:>+7.3f}% {x['ops']:>6}")
PY
}

echo "job                          ranks  rank  predicted   emulated    error  ovh(ms) err-ovh     ops"
run gpt-small-16 0 tests/cli/data/job_small.yaml
run gpt-small-16 15 tests/cli/data/job_small.yaml
run llama3-8b-64 0 examples/jobs/llama3-8b-h100-64.yaml
run llama3-8b-64 63 examples/jobs/llama3-8b-h100-64.yaml
run llama3-8b-64-two 0,63 examples/jobs/llama3-8b-h100-64.yaml
run llama3-8b-256 255 examples/jobs/llama3-8b-h100-64.yaml --set cluster.num_gpus=256
run gpt3-175b-1024 0 examples/jobs/gpt3-175b-a100-1024.yaml
run gpt3-175b-1024 1023 examples/jobs/gpt3-175b-a100-1024.yaml
run llama3-8b-8192 0 examples/jobs/llama3-8b-h100-64.yaml --set cluster.num_gpus=8192 \
  --set training.global_batch_size=8192
run llama3-8b-8192 8191 examples/jobs/llama3-8b-h100-64.yaml --set cluster.num_gpus=8192 \
  --set training.global_batch_size=8192
