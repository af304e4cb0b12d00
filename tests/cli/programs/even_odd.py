"""A rank-dependent program for the role check of `prism emulate`: even
ranks send a tensor to the next rank, odd ranks receive it from the one
before, then every rank all-reduces once. Within one pipeline stage its ranks
do not all run one program, which the capture must find before emulating.
--same makes every rank all-reduce only (one program for all)."""

import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(16)
    if "--same" not in sys.argv:
        if rank % 2 == 0:
            dist.send(t, rank + 1)
        else:
            dist.recv(t, rank - 1)
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
