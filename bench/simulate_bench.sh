#!/usr/bin/env bash
# Benchmark of `prism simulate` end to end (read the job, build the graph,
# replay, report): folded and unfolded, REPEATS runs each, alternating, with
# the median wall time, the median user CPU time (what to compare on a
# shared machine) and the largest peak RSS. docs/benchmarks.md records
# the figures. Usage: bench/simulate_bench.sh [JOB.yaml] [REPEATS]
set -euo pipefail
job=${1:-bench/jobs/llama3.1-405b-16k.yaml}
repeats=${2:-3}
prism=${PRISM:-build/bin/prism}
[[ -x $prism ]] || { echo "error: $prism not built (cmake --build --preset release)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for ((i = 1; i <= repeats; i++)); do
  for mode in folded unfolded; do
    flag=""
    [[ $mode == unfolded ]] && flag=--no-fold
    /usr/bin/time -f "%e %M %U" -o "$tmp/$mode.$i" "$prism" simulate "$job" $flag \
      --report "$tmp/$mode.json" >/dev/null
    echo "run $i $mode: $(cut -d' ' -f1 "$tmp/$mode.$i") s wall, $(cut -d' ' -f3 "$tmp/$mode.$i") s user" >&2
  done
done

# median_of MODE FIELD: the median of a field of /usr/bin/time's lines.
median_of() {
  cat "$tmp/$1".[0-9]* | cut -d' ' -f"$2" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
for mode in folded unfolded; do
  median=$(median_of "$mode" 1)
  user=$(median_of "$mode" 3)
  rss_kb=$(cat "$tmp/$mode".[0-9]* | cut -d' ' -f2 | sort -g | tail -1)
  iter=$(grep -o '"iteration_time_s": [0-9.e+-]*' "$tmp/$mode.json" | cut -d' ' -f2)
  events=$(grep -o '"op_events": [0-9]*' "$tmp/$mode.json" | cut -d' ' -f2)
  printf '%-9s median %6.2f s wall  %6.2f s user  peak RSS %7.3f GiB  iteration %s s  %s op events\n' \
    "$mode" "$median" "$user" "$(echo "$rss_kb / 1048576" | bc -l)" "$iter" "$events"
done
