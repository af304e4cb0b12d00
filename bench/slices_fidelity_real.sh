#!/usr/bin/env bash
# The all-real side of the pipeline-slices fidelity experiment: runs
# examples/pipeline_gpt/train.py with every rank a real process (no PrismLLM),
# RUNS times, and prints each rank's final line per run, then the median over
# runs of each rank's median step time. PrismLLM's emulation of the same
# program (one captured rank per stage) is compared against these figures.
#
# Each rank is pinned to its own core (taskset -c RANK) when there are enough
# cores: left to the scheduler, runs on 2 cores were bimodal (~190 vs ~265 ms
# a step). PIN=0 turns pinning off. Other work on the machine shows up in the
# step times too, so each run says how much CPU was used outside its ranks
# (busy time in /proc/stat less the ranks' own, as a share of all cores): more
# than a few percent marks a run not to trust. Contention from outside this
# machine's kernel (the VM's host) does not show there; on the 2-core VM this
# was written on, a core at times ran the same stage up to ~40% slower.
#
#   bench/slices_fidelity_real.sh [RUNS] [-- extra train.py args]
#   WORLD=4 bench/slices_fidelity_real.sh 1 -- --pp 2 --steps 3
set -euo pipefail
runs=${1:-5}
[[ $# -gt 0 && $1 != -- ]] && shift
[[ $# -gt 0 && $1 == -- ]] && shift
world=${WORLD:-2}
pin=${PIN:-1}
(( world <= $(nproc) )) || pin=0
py=/usr/bin/python3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2+$3+$4+$7+$8+$9) / hz}' /proc/stat; }
children_s() { awk 'NR == 2 {gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4}' "$1"; }

for run in $(seq 1 "$runs"); do
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  times >"$out/times0"  # in this shell: its waited-for children's CPU time so far
  start=$EPOCHREALTIME busy0=$(busy_s)
  declare -A rank_of=()
  for rank in $(seq 0 $((world - 1))); do
    cpu=(); (( pin )) && cpu=(taskset -c "$rank")
    RANK=$rank WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "${cpu[@]}" "$py" examples/pipeline_gpt/train.py "$@" >"$out/$run.$rank.out" 2>"$out/$run.$rank.err" &
    rank_of[$!]=$rank
  done
  while (( ${#rank_of[@]} )); do  # the first rank to fail ends the run
    status=0
    wait -n -p pid "${!rank_of[@]}" || status=$?
    if (( status )); then
      echo "error: run $run: rank ${rank_of[$pid]} exited with $status; its stderr:" >&2
      cat "$out/$run.${rank_of[$pid]}.err" >&2
      kill "${!rank_of[@]}" 2>/dev/null || true
      exit 1
    fi
    unset "rank_of[$pid]"
  done
  times >"$out/times1"
  other=$(awk -v b="$(busy_s)" -v b0="$busy0" -v o="$(children_s "$out/times1")" -v o0="$(children_s "$out/times0")" \
    -v t="$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {print b - a}')" -v n="$(nproc)" \
    'BEGIN {printf "%.1f", ((b - b0) - (o - o0)) / (t * n) * 100}')
  echo "run $run: (CPU used outside the ranks: $other%)"
  for rank in $(seq 0 $((world - 1))); do
    echo "  $(tail -n 1 "$out/$run.$rank.out")"
  done
done

echo "median over $runs runs of each rank's median step:"
cat "$out"/*.out | "$py" -c '
import re, statistics, sys
per_rank = {}
for m in re.finditer(r"rank (\d+) stage (\d+): .* median step ([0-9.]+) ms", sys.stdin.read()):
    per_rank.setdefault((int(m.group(1)), int(m.group(2))), []).append(float(m.group(3)))
for (rank, stage), xs in sorted(per_rank.items()):
    med = statistics.median(xs)
    print(f"  rank {rank} stage {stage}: {med:.3f} ms  (runs {min(xs):.3f}..{max(xs):.3f}, "
          f"spread {(max(xs) - min(xs)) / med * 100:.2f}%)")
'
