#!/usr/bin/env bash
# Benchmark of `prism search` end to end: Llama 3.1 70B on 1,024 H100s over
# 960 combinations of tp, pp, vpp, cp, micro-batch size and recompute (642
# valid, each built and simulated folded; the out-of-memory ones twice),
# REPEATS runs, with the wall and CPU (user + system) time of each, the
# median wall time and the largest peak RSS. On a shared machine the CPU
# time says what an idle one would take: about CPU / JOBS. docs/benchmarks.md records the figures. Target: >= 500 configurations
# in <= 2 minutes on 2 cores.
# Usage: bench/search_bench.sh [REPEATS] [JOBS]
set -euo pipefail
repeats=${1:-1}
jobs=${2:-2}
job=bench/jobs/llama3.1-70b-1024.yaml
prism=${PRISM:-build/bin/prism}
[[ -x $prism ]] || { echo "error: $prism not built (cmake --build --preset release)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((i = 1; i <= repeats; i++)); do
  /usr/bin/time -f "%e %M %U %S" -o "$tmp/time.$i" "$prism" search "$job" \
    --tp 1,2,4,8 --pp 1,2,4,8,16 --vpp 1,2,4,5 --cp 1,2 --mbs 1,2 --recompute none,selective,full \
    -j "$jobs" --report "$tmp/report.json" >"$tmp/out.$i"
  read -r wall _ user sys <"$tmp/time.$i"
  echo "run $i: $wall s wall, $(echo "$user + $sys" | bc) s CPU, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
cat "$tmp/out.1"
median=$(cat "$tmp"/time.* | cut -d' ' -f1 | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
rss_kb=$(cat "$tmp"/time.* | cut -d' ' -f2 | sort -g | tail -1)
valid=$(grep -o '"valid": [0-9]*' "$tmp/report.json" | cut -d' ' -f2)
printf '\n%s configurations simulated on %s threads: median %.2f s (%.1f per second), peak RSS %.3f GiB\n' \
  "$valid" "$jobs" "$median" "$(echo "$valid / $median" | bc -l)" "$(echo "$rss_kb / 1048576" | bc -l)"
