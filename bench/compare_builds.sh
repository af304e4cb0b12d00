#!/usr/bin/env bash
# Two builds of PrismLLM side by side: the same benchmarks run alternately,
# ROUNDS rounds, one run of each per round, and the median of each figure
# printed for both; first, every example job's `prism simulate` report and
# every example graph's `prism replay` report are compared byte for byte.
# For a change that must leave behaviour and speed unchanged (issue 21);
# docs/benchmarks.md records its results.
# Usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]
set -euo pipefail
old=${1:?usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]}
new=${2:?usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS]}
rounds=${3:-5}
for d in "$old" "$new"; do
  for b in prism prism_bench_replay prism_bench_wire prism_bench_net prism_bench_allocator; do
    [[ -x $d/$b ]] || { echo "error: $d/$b missing (cmake --build --preset release)" >&2; exit 1; }
  done
done
[[ -x /usr/bin/time ]] || { echo "error: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Same outputs: simulate reports of the example jobs, replay reports of the
# example graphs (a job or graph either build refuses must be refused alike).
same=0 differ=0
for f in examples/jobs/*.yaml examples/validation/*.yaml examples/graphs/*.json; do
  [[ -e $f ]] || continue
  cmd=simulate
  [[ $f == *.json ]] && cmd=replay
  for side in old new; do
    dir=$old
    [[ $side == new ]] && dir=$new
    rc=0
    "$dir/prism" "$cmd" "$f" --report "$tmp/$side.json" >"$tmp/$side.out" 2>&1 || rc=$?
    echo "exit $rc" >>"$tmp/$side.out"
    [[ -e $tmp/$side.json ]] || : >"$tmp/$side.json"
  done
  if cmp -s "$tmp/old.json" "$tmp/new.json" && cmp -s "$tmp/old.out" "$tmp/new.out"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFERS: prism $cmd $f" >&2
  fi
  rm -f "$tmp/old.json" "$tmp/new.json"
done
echo "outputs: $same identical, $differ different (simulate/replay report and printed text)"

# One line "name value" per figure, appended to $tmp/<side>.
measure() {
  local dir=$1 out=$2 t
  "$dir/prism_bench_replay" --repeats 1 --mode both >"$tmp/r.txt" 2>&1
  awk 'NF >= 10 && $1 == "folded" {print "replay_folded_wall_s", $4+0}
       NF >= 10 && $1 == "unfolded" {print "replay_unfolded_cpu_s", $7+0
                                     print "replay_unfolded_events_per_cpu_s", $9+0}' \
    "$tmp/r.txt" >>"$out"
  /usr/bin/time -f "%e %M" -o "$tmp/t.txt" "$dir/prism" simulate bench/jobs/llama3.1-405b-16k.yaml >/dev/null
  read -r t _ <"$tmp/t.txt"
  echo "simulate_405b_16k_folded_wall_s $t" >>"$out"
  "$dir/prism_bench_wire" --repeats 1 >"$tmp/w.txt" 2>&1
  awk '$1 ~ /^(unix|tcp|unix\+spin|tcp\+spin)$/ {print "wire_" $1 "_p50_us", $2}' "$tmp/w.txt" >>"$out"
  "$dir/prism_bench_net" --repeats 1 >"$tmp/n.txt" 2>&1
  awk '/collective queries/ {print "net_1M_queries_s", $5+0}
       /start event/ {print "net_rerate_start_ms", $4+0}
       /finish event/ {print "net_rerate_finish_ms", $4+0}' "$tmp/n.txt" >>"$out"
  "$dir/prism_bench_allocator" --repeats 1 --only training >"$tmp/a.txt" 2>&1
  awk '$1 == "training" && $2 == "default" {print "allocator_training_M_events_per_s", $12+0}' \
    "$tmp/a.txt" >>"$out"
}

for ((i = 1; i <= rounds; i++)); do
  measure "$old" "$tmp/old"
  measure "$new" "$tmp/new"
  echo "round $i of $rounds done" >&2
done

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
printf '%-36s %12s %12s %8s\n' figure "old (median)" "new (median)" change
for name in $(cut -d' ' -f1 "$tmp/old" | awk '!seen[$0]++'); do
  o=$(awk -v n="$name" '$1 == n {print $2}' "$tmp/old" | median)
  n=$(awk -v n="$name" '$1 == n {print $2}' "$tmp/new" | median)
  printf '%-36s %12s %12s %7.1f%%\n' "$name" "$o" "$n" "$(echo "($n - $o) * 100 / $o" | bc -l)"
done
