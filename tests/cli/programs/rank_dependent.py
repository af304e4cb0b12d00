"""Rank-dependent programs for the role splitting of `prism emulate` (issue 22,
item 4), on the 8-rank job of rank_dependent-8.yaml (tp 2, dp 4; rank = tp +
2 dp). Every rank all-reduces once over the world, then:
  --gather   rank 0 of each data-parallel group gathers a tensor of its
             group's ranks (torch.distributed.gather: the root receives from
             each rank, the others send to the root); the roles split at dp
             rank 0.
  --scatter  rank 0 of the world sends a tensor to every other rank; no rule
             of the layout splits the ranks so (the receivers' peer is rank 0,
             which neither moves with them nor stays in their group), unless
             ranks 0 and 1 are listed to capture (--capture-ranks 0,1)."""

import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    tp = 2
    groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
    t = torch.ones(16)
    dist.all_reduce(t)
    if "--gather" in sys.argv:
        group = groups[rank % tp]
        root = rank % tp  # dp rank 0 of the group
        out = [torch.empty(16) for _ in range(world // tp)] if rank == root else None
        dist.gather(t, out, dst=root, group=group)
        if rank == root:
            assert all(torch.equal(o, t) for o in out), "gather: wrong data"
    if "--scatter" in sys.argv:
        if rank == 0:
            for peer in range(1, world):
                dist.send(t, peer)
        else:
            dist.recv(t, 0)
    dist.all_reduce(t)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
