#!/usr/bin/env python3
"""Check (e) of scripts/gpu/check.sh: the device memory one NCCL communicator
takes, measured with torch.cuda.mem_get_info (what NVML reports for the
process's context) before and after ncclCommInitRank, after a first
all-reduce (NCCL connects lazily) and after ncclCommDestroy.

    nccl_footprint.py --lib PATH [--label NAME]

--lib: the libnccl.so.2 to load: the REAL one of torch (nvidia-nccl's wheel,
found with --lib real) or PrismLLM's drop-in (then run it under `prism emulate`
as rank 0: the drop-in needs the coordinator). The communicator has
WORLD_SIZE ranks (1 when unset) and this process is rank RANK (0), the root,
which makes the unique id. Prints one line `FOOTPRINT {json}`, bytes.

Run on an H200 on 2026-11-27 (docs/gpu.md, Results).
"""

import argparse
import ctypes
import glob
import json
import os
import sys


def real_nccl():
    import torch
    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = glob.glob(os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so*"))
    found += glob.glob(os.path.join(site, "nvidia", "*", "lib", "libnccl.so*"))
    if not found:
        sys.exit("nccl_footprint.py: no libnccl.so.2 under %s/nvidia (torch's NCCL)" % site)
    return sorted(found)[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", required=True, help="path of libnccl.so.2, or 'real' for torch's")
    p.add_argument("--label", default="")
    p.add_argument("--comms", type=int, default=1,
                   help="communicators made one after another (the second shows what one more "
                        "costs once NCCL's kernels are loaded); each then all-reduces once")
    args = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("nccl_footprint.py: no CUDA device (torch.cuda.is_available() is False)")
    path = real_nccl() if args.lib == "real" else args.lib
    torch.cuda.set_device(0)
    torch.cuda.synchronize()
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    version = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(version))
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if rank != 0:
        sys.exit("nccl_footprint.py: run it as rank 0 (the root makes the unique id)")
    # ncclUniqueId is a struct of 128 bytes passed BY VALUE to ncclCommInitRank:
    # a ctypes Structure, not a char buffer (which would pass a pointer).
    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    used = lambda: (lambda f, t: t - f)(*torch.cuda.mem_get_info())
    out = {"label": args.label, "lib": path, "nccl_version": version.value, "nranks": world,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    out["used_before"] = used()
    check = lambda what, rc: rc == 0 or sys.exit("nccl_footprint.py: %s returned %d" % (what, rc))
    out["env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    comms, after_init = [], []
    for _ in range(max(args.comms, 1)):
        uid = UniqueId()
        check("ncclGetUniqueId", lib.ncclGetUniqueId(ctypes.byref(uid)))
        comm = ctypes.c_void_p()
        check("ncclCommInitRank", lib.ncclCommInitRank(ctypes.byref(comm), world, uid, rank))
        torch.cuda.synchronize()
        comms.append(comm)
        after_init.append(used())
    out["used_after_init"] = after_init[0]
    out["used_after_each_init"] = after_init
    x = torch.ones(1 << 20, device="cuda")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    out["used_with_tensor"] = used()
    after_ar = []
    for comm in comms:
        # ncclAllReduce(send, recv, count, ncclFloat32=7, ncclSum=0, comm, stream)
        check("ncclAllReduce", lib.ncclAllReduce(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(x.data_ptr()),
                                                 ctypes.c_size_t(x.numel()), 7, 0, comm, stream))
        torch.cuda.synchronize()
        after_ar.append(used())
    out["used_after_allreduce"] = after_ar[0]
    out["used_after_each_allreduce"] = after_ar
    for comm in comms:
        check("ncclCommDestroy", lib.ncclCommDestroy(comm))
    torch.cuda.synchronize()
    out["used_after_destroy"] = used()
    out["footprint_init"] = out["used_after_init"] - out["used_before"]
    out["footprint_connected"] = out["used_after_allreduce"] - out["used_with_tensor"] + out["footprint_init"]
    if len(comms) > 1:  # one more communicator, NCCL's kernels loaded already
        out["next_comm_init"] = after_init[1] - after_init[0]
        out["next_comm_connected"] = after_ar[1] - after_ar[0] + out["next_comm_init"]
    print("FOOTPRINT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
