"""A TCPStore server standing in for the rendezvous host of a job whose
other ranks are virtual (torch_backend_test.cc).

Usage: store_server.py WORLD_SIZE. Prints the port, then serves until its
stdin closes (the test ends). torch 1.13's init_process_group and new_group
wait in _store_based_barrier until a counter reaches the world size; the
virtual ranks' increments are added here in advance, for the first 32 groups.
"""

import sys
from datetime import timedelta

import torch.distributed as dist

world_size = int(sys.argv[1])
store = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=120), wait_for_workers=False)
# env:// with TORCHELASTIC_USE_AGENT_STORE=True prefixes keys with
# /worker/attempt_<restart count>, and init_process_group with default_pg.
for group in range(1, 33):
    store.add(f"/worker/attempt_0/default_pg/store_based_barrier_key:{group}", world_size - 1)
print(store.port, flush=True)
sys.stdin.read()
