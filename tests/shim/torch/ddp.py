"""A tiny DistributedDataParallel training on CPU, unmodified: 3 steps of
two linear layers. DDP's gradient average over identical peers is the local
gradient, so the model must train exactly as a local copy does (updated by
hand: a second optimizer would send iteration markers too)."""

import copy
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="gloo", init_method="env://")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
local = copy.deepcopy(model)
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(5, 8), torch.randn(5, 4)
    opt.zero_grad()
    nn.functional.mse_loss(ddp(x), y).backward()
    opt.step()
    local.zero_grad()
    nn.functional.mse_loss(local(x), y).backward()
    with torch.no_grad():
        for p in local.parameters():
            p -= 0.1 * p.grad
for p, q in zip(model.parameters(), local.parameters()):
    if not torch.allclose(p, q):
        print("FAILED: DDP diverged from the local model", flush=True)
        sys.exit(3)
print("DONE", flush=True)
