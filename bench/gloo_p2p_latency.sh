#!/usr/bin/env bash
# One-way latency of a torch.distributed send over Gloo between two processes
# on this machine (loopback TCP), each pinned to its own core as
# bench/slices_fidelity_real.sh pins the pipeline's ranks: rank 0 stamps the
# time, sends BYTES, and rank 1 takes the difference when its recv returns
# (both read the same monotonic clock). The median over ROUNDS calibrates the
# link of examples/jobs/pipeline-gpt-2.yaml (docs/validation.md).
#
#   bench/gloo_p2p_latency.sh [BYTES] [ROUNDS]     # default 32768 bytes, 100 rounds
set -euo pipefail
bytes=${1:-32768}
rounds=${2:-100}
idle_ms=${3:-2}
py=/usr/bin/python3
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat >"$out/p2p.py" <<'PY'
import statistics, sys, time
import torch
import torch.distributed as dist

nbytes, rounds, idle_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
buf = torch.zeros(max(1, nbytes // 4))
stamp = torch.zeros(1, dtype=torch.float64)
lat = []
for i in range(rounds + 5):  # the first 5 warm up
    dist.barrier()
    if rank == 0:
        time.sleep(idle_ms / 1e3)
        stamp[0] = time.perf_counter()
        dist.send(buf, 1)
        dist.send(stamp, 1)
    else:
        dist.recv(buf, 0)
        now = time.perf_counter()
        dist.recv(stamp, 0)
        if i >= 5:
            lat.append((now - stamp.item()) * 1e6)
if rank == 1:
    lat.sort()
    print(f"gloo send of {buf.numel() * 4} bytes, one way: median {statistics.median(lat):.1f} us, "
          f"p10 {lat[len(lat) // 10]:.1f} us, p90 {lat[len(lat) * 9 // 10]:.1f} us ({len(lat)} rounds)")
PY
pids=()
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port taskset -c "$rank" \
    "$py" "$out/p2p.py" "$bytes" "$rounds" "$idle_ms" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
