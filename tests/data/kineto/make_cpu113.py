# Makes tests/data/kineto/cpu113_rank{0,1}.json: a 2-rank gloo run on
# 127.0.0.1 profiled by torch 1.13's profiler (Debian's python3-torch has no
# Kineto, so the files are the legacy profiler's JSON array). Timings differ
# run to run; the committed files are one run's.
#   /usr/bin/python3 tests/data/kineto/make_cpu113.py tests/data/kineto
import os, sys, torch, torch.distributed as dist
from torch.profiler import profile, ProfilerActivity, schedule
def main(rank, world, outdir):
    os.environ["MASTER_ADDR"] = "127.0.0.1"; os.environ["MASTER_PORT"] = "29533"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 16)
    def ready(p):
        p.export_chrome_trace(os.path.join(outdir, f"cpu113_rank{rank}.json"))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=ready, profile_memory=True, record_shapes=True) as p:
        for step in range(3):
            loss = model(x).sum()
            loss.backward()
            dist.all_reduce(model.weight.grad)
            if rank == 0: dist.send(torch.ones(4), 1)
            else: dist.recv(torch.ones(4), 0)
            opt.step(); opt.zero_grad()
            p.step()
    dist.destroy_process_group()
if __name__ == "__main__":
    import torch.multiprocessing as mp
    mp.spawn(main, args=(2, sys.argv[1] if len(sys.argv) > 1 else "."), nprocs=2)
