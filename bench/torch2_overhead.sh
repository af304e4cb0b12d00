#!/usr/bin/env bash
# The torch 2.x c10d backend's own cost (issue 22, "Fidelity and
# performance"; docs/benchmarks.md, "torch2_overhead.sh"):
# bench/torch2_collective.py (2,000 blocking all_reduces of one float, then
# 40 timed blocks of a fixed CPU matmul loop) run ROUNDS times each of three
# ways, in turn, the order rotated from round to round:
#   alone     world 1 on plain Gloo, no PrismLLM (RANK=0 WORLD_SIZE=1);
#   emulated  `prism emulate bench/jobs/torch2-overhead-8.yaml --real-ranks
#             0` on a near-instant network (latency 0, 99,999 Gb/s, as
#             scripts/gpu/check.sh's `fast`): rank 0 real, 7 virtual; a
#             blocking all_reduce between blocks, none in flight during one;
#   spaced    the same on a network of LATENCY_US (20 ms) latency: each
#             blocking all_reduce between blocks takes 120 ms of wall time
#             (a real rank's virtual time is its real time), so every block
#             starts after the rank slept, as in overlap; nothing in flight.
#             This run makes 10 round trips only, and its round-trip figures
#             are the latency's, not the backend's;
#   overlap   spaced with --overlap: an all_reduce in flight during each
#             block, so the backend's progress thread polls the coordinator
#             (every PRISM_TORCH_POLL_US, 200 us, unless the coordinator said
#             nothing can complete sooner) while the block computes. Its
#             cost is overlap against spaced: against alone it includes
#             what sleeping 120 ms before each block does to the caches.
# The real rank (and, under `prism emulate`, its capture) is pinned to core 0
# with one torch thread; the coordinator is left to the scheduler. The
# emulations capture rank 0 only (--no-verify-roles). COORD_CPU=1 pins
# `prism emulate` (the coordinator) to core 1, away from the rank's core.
# After `--`, `--spin` has the program wait for each all_reduce of its
# compute phase by spinning on is_completed(): spaced and overlap then keep
# the core busy through the 120 ms, and overlap vs spaced is left with the
# progress thread's cost, without what a sleep before each block does.
#
# Per run the program gives the round trips' p50/p90/p99/max and the
# blocks' median wall and CPU time. The script prints every run, then the
# medians over rounds of each figure, and the compute perturbation: the
# median over rounds of each round's emulated (spaced, overlap) block time
# against its alone one, and overlap against spaced, with p10, p90 and the
# largest.
#
#   bench/torch2_overhead.sh [ROUNDS] [BUILD_DIR] [-- extra torch2_collective.py args]
#   PYTHON=/work/main/.venv/bin/python bench/torch2_overhead.sh 10
#   COORD_CPU=1 PYTHON=/work/main/.venv/bin/python bench/torch2_overhead.sh 16 build -- --spin
set -euo pipefail
rounds=${1:-5}
build=${2:-build}
shift $(($# < 2 ? $# : 2))
[[ $# -gt 0 && $1 == -- ]] && shift
py=${PYTHON:-.venv/bin/python}
[[ -x $py ]] || {
  echo "error: PYTHON=$py is not an interpreter (torch 2.x; scripts/setup.sh makes .venv)" >&2
  exit 2
}
latency=${LATENCY_US:-20000}
out=$(mktemp -d)
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$out"' EXIT
program=(taskset -c 0 "$py" bench/torch2_collective.py "$@")
prism=("$build/bin/prism")
[[ -n ${COORD_CPU:-} ]] && prism=(taskset -c "$COORD_CPU" "${prism[@]}")
fast=(--set cluster.network.latency_us=0 --set cluster.network.nic_Gbps=99999
  --set cluster.node.nvlink_link_GBps=9999)

run() { # way round
  local way=$1 round=$2 status=0
  awk '{print $1}' /proc/loadavg >"$out/$way$round.load"
  case $way in
  alone)
    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$py" -c \
      'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') \
      OMP_NUM_THREADS=1 "${program[@]}" >"$out/$way$round.out" 2>&1 || status=$?
    ;;
  emulated)
    OMP_NUM_THREADS=1 "${prism[@]}" emulate bench/jobs/torch2-overhead-8.yaml "${fast[@]}" \
      --real-ranks 0 --master-port 0 --no-verify-roles -- "${program[@]}" >"$out/$way$round.out" 2>&1 ||
      status=$?
    ;;
  spaced | overlap)
    local overlap=()
    [[ $way == overlap ]] && overlap=(--overlap)
    OMP_NUM_THREADS=1 "${prism[@]}" emulate bench/jobs/torch2-overhead-8.yaml "${fast[@]}" \
      --set cluster.network.latency_us="$latency" --real-ranks 0 --master-port 0 --no-verify-roles \
      -- "${program[@]}" "${overlap[@]}" --calls 10 --warmup-calls 0 >"$out/$way$round.out" 2>&1 ||
      status=$?
    ;;
  esac
  if ((status)); then
    echo "error: round $round, $way: exited with $status; its output:" >&2
    cat "$out/$way$round.out" >&2
    exit 1
  fi
}
ways=(alone emulated spaced overlap)
for round in $(seq 1 "$rounds"); do
  echo "round $round of $rounds ($(date -u +%T)) ..." >&2
  for k in 0 1 2 3; do run "${ways[$(((round - 1 + k) % 4))]}" "$round"; done
done

"$py" - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
ways = ("alone", "emulated", "spaced", "overlap")

def result(way, i):
    # Under `prism emulate` the capture prints first, the real rank last.
    found = re.findall(r"torch2_collective: (\{.*\})", open(f"{out}/{way}{i}.out").read())
    if not found:
        sys.exit(f"error: round {i}, {way}: the program printed no result line")
    r = json.loads(found[-1])
    r["load"] = float(open(f"{out}/{way}{i}.load").read())
    return r

rows = [{way: result(way, i) for way in ways} for i in range(1, rounds + 1)]
print(f"{'round':>5} {'way':<9} {'load':>5} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'max us':>9} "
      f"{'block ms':>9} {'cpu ms':>8} {'vs alone':>9}")
for i, r in enumerate(rows, 1):
    for way in ways:
        x, t = r[way], r[way]["trip_us"]
        vs = "" if way == "alone" else f"{100 * (x['block_ms'] / r['alone']['block_ms'] - 1):+8.2f}%"
        print(f"{i:>5} {way:<9} {x['load']:>5.2f} {t['p50']:>8.1f} {t['p90']:>8.1f} {t['p99']:>8.1f} "
              f"{t['max']:>9.1f} {x['block_ms']:>9.3f} {x['block_cpu_ms']:>8.3f} {vs:>9}")

def quantile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (k - lo)

print(f"medians over {rounds} rounds ({rows[0]['alone']['calls']} round trips, "
      f"{rows[0]['alone']['blocks']} blocks a run):")
for way in ways:
    med = lambda f: statistics.median(f(r[way]) for r in rows)
    print(f"  {way:<9} round trip p50 {med(lambda x: x['trip_us']['p50']):.1f} us, "
          f"p90 {med(lambda x: x['trip_us']['p90']):.1f} us, p99 {med(lambda x: x['trip_us']['p99']):.1f} us, "
          f"max {med(lambda x: x['trip_us']['max']):.1f} us; block {med(lambda x: x['block_ms']):.3f} ms "
          f"wall, {med(lambda x: x['block_cpu_ms']):.3f} ms cpu")
pairs = [(way, "alone") for way in ways[1:]] + [("overlap", "spaced")]
for way, base in pairs:
    for what in ("block_ms", "block_cpu_ms"):
        d = [100 * (r[way][what] / r[base][what] - 1) for r in rows]
        print(f"  compute perturbation, {way} vs {base} ({'wall' if what == 'block_ms' else 'cpu'}): "
              f"median {statistics.median(d):+.2f}% over {len(d)} rounds, p10 {quantile(d, 0.1):+.2f}%, "
              f"p90 {quantile(d, 0.9):+.2f}%, largest {max(d, key=abs):+.2f}%")
PY
