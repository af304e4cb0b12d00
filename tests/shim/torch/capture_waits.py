"""Waits under a capture (the fake's welcome says capture): four async
all-reduces, a pause so that the progress thread takes their answers first,
then Work.wait() on the first and third; the second is waited for through
its future only, the fourth not at all. Prints the order of the ops."""

import time

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo", init_method="env://")
works = [dist.all_reduce(torch.ones(4), async_op=True) for _ in range(4)]
time.sleep(0.2)  # the answers arrive and the progress thread takes them
works[0].wait()
works[1].get_future().wait()
works[2].wait()
works[2].wait()  # a second wait for the same work says nothing more
print("CAPTURE_WAITS_DONE", flush=True)
dist.destroy_process_group()
