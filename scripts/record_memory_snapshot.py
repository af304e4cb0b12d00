#!/usr/bin/env python3
"""Record PyTorch CUDA memory histories of small workloads for `prism memory replay`.

Each workload runs in its own Python process, so that the history is recorded
from before the first CUDA allocation and PYTORCH_CUDA_ALLOC_CONF takes
effect (the allocator reads it once, when CUDA initializes):

  mlp_adam          a 4-layer MLP trained with Adam, 6 steps (default settings)
  transformer_adam  a transformer encoder block trained with Adam, 4 steps
  record_stream     tensors consumed on a side stream (Tensor.record_stream),
                    freed while that stream still works, then empty_cache()
  expandable        mlp_adam with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  max_split         varied large tensors with max_split_size_mb:64, and
                    empty_cache()
  roundup           mixed request sizes with roundup_power2_divisions:4
  gpt_bf16          a 4-layer GPT trained in bf16 autocast with activation
                    checkpointing, 2 micro-batches per step, fused AdamW, 3 steps
  retry_oom         fills the GPU with 1 GiB tensors until cudaMalloc fails
                    (an out-of-memory), frees every other one, asks for 2 GiB
                    (release the cache and retry), then for more than the GPU
  expandable_oom    retry_oom with expandable_segments:True (pages unmapped)

For each NAME the output directory gets NAME.pickle (what
torch.cuda.memory._dump_snapshot() writes) and NAME.json (converted by
scripts/memory_snapshot_to_json.py); with --prism PATH each JSON is also
replayed (`prism memory replay NAME.json --report NAME.report.json`) and a
table of the results printed. manifest.json records the torch version, the
GPU and each workload's settings.

    python3 scripts/record_memory_snapshot.py --out DIR [--prism build/bin/prism]
        [--only mlp_adam,max_split] [--device 0]

Needs torch with CUDA; --list works without it.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import memory_snapshot_to_json as converter  # noqa: E402

MAX_ENTRIES = 2_000_000

# name -> (PYTORCH_CUDA_ALLOC_CONF, description)
WORKLOADS = {
    "mlp_adam": ("", "4-layer MLP, Adam, 6 steps"),
    "transformer_adam": ("", "transformer encoder block, Adam, 4 steps"),
    "record_stream": ("", "side-stream consumers with record_stream, empty_cache"),
    "expandable": ("expandable_segments:True", "mlp_adam with expandable segments"),
    "max_split": ("max_split_size_mb:64", "varied large tensors, empty_cache"),
    "roundup": ("roundup_power2_divisions:4", "mixed request sizes"),
    "gpt_bf16": ("", "4-layer GPT, bf16 autocast, checkpointing, AdamW, 3 steps"),
    "retry_oom": ("", "fill the GPU, out of memory, release-and-retry"),
    "expandable_oom": ("expandable_segments:True", "retry_oom with expandable segments"),
}


# --- workloads (run in the child process, torch imported) ----------------

def _train(torch, model, make_batch, steps):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        x, y = make_batch()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, y, loss


def run_mlp_adam(torch, dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(),
        torch.nn.Linear(4096, 4096), torch.nn.GELU(),
        torch.nn.Linear(4096, 1024), torch.nn.GELU(),
        torch.nn.Linear(1024, 1024)).to(dev)
    _train(torch, model, lambda: (torch.randn(256, 1024, device=dev),
                                  torch.randn(256, 1024, device=dev)), steps=6)


def run_transformer_adam(torch, dev):
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                             batch_first=True).to(dev)
    _train(torch, model, lambda: (torch.randn(8, 128, 512, device=dev),
                                  torch.randn(8, 128, 512, device=dev)), steps=4)


def run_record_stream(torch, dev):
    side = torch.cuda.Stream(device=dev)
    keep = []
    for i in range(8):
        x = torch.randn(1 << 18, device=dev) * (i + 1)  # 1 MiB: small pool
        big = torch.randn(3 << 20, device=dev)           # 12 MiB: large pool
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            keep.append((x.sum() + big.sum()).unsqueeze(0))
            torch.cuda._sleep(1_000_000)  # keep the side stream busy past the frees
        x.record_stream(side)
        big.record_stream(side)
        del x, big  # freed now; reusable once the side stream is done
        y = torch.randn(3 << 20, device=dev)  # cannot take big's block yet
        del y
    torch.cuda.current_stream(dev).wait_stream(side)
    torch.cuda.synchronize(dev)
    total = torch.cat(keep).sum()
    del keep, total
    torch.cuda.empty_cache()


def run_expandable(torch, dev):
    run_mlp_adam(torch, dev)


def run_max_split(torch, dev):
    mib = 1 << 20
    held = []
    for size_mib in (100, 90, 70, 10, 40, 130, 64, 65, 3, 200, 24):
        t = torch.empty(size_mib * mib, dtype=torch.uint8, device=dev)
        if size_mib in (70, 130, 3):
            held.append(t)
        del t
    torch.cuda.empty_cache()
    for size_mib in (30, 66, 100):
        held.append(torch.empty(size_mib * mib, dtype=torch.uint8, device=dev))
    del held
    torch.cuda.empty_cache()


def run_roundup(torch, dev):
    held = []
    for n in (1200, 70_000, 1_300_000, 1_700_000, 5_000_000, 12_345_678, 33_000_000):
        held.append(torch.empty(n, dtype=torch.uint8, device=dev))
        if len(held) > 3:
            held.pop(0)
    del held


def run_gpt_bf16(torch, dev):
    from torch.utils.checkpoint import checkpoint  # noqa: PLC0415

    torch.manual_seed(0)
    vocab, hidden = 8192, 1024
    layers = torch.nn.ModuleList(
        torch.nn.TransformerEncoderLayer(d_model=hidden, nhead=16, dim_feedforward=4 * hidden,
                                         batch_first=True, norm_first=True)
        for _ in range(4)).to(dev)
    embed = torch.nn.Embedding(vocab, hidden).to(dev)
    head = torch.nn.Linear(hidden, vocab, bias=False).to(dev)
    params = list(embed.parameters()) + list(layers.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
    for _ in range(3):
        for _ in range(2):  # micro-batches: gradients accumulate
            tokens = torch.randint(0, vocab, (4, 512), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                h = embed(tokens)
                for layer in layers:
                    h = checkpoint(layer, h, use_reentrant=False)
                logits = head(h)
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, vocab),
                                                     tokens.view(-1))
            loss.backward()
            del tokens, h, logits, loss
        opt.step()
        opt.zero_grad(set_to_none=True)


def run_retry_oom(torch, dev):
    gib = 1 << 30
    held = []
    try:
        while True:
            held.append(torch.empty(gib, dtype=torch.uint8, device=dev))
    except torch.OutOfMemoryError:
        pass  # the trace holds the out-of-memory
    del held[::2]  # cached, not released: 1 GiB free blocks in separate segments
    try:
        held.append(torch.empty(2 * gib, dtype=torch.uint8, device=dev))  # release, retry
    except torch.OutOfMemoryError:
        pass
    try:
        torch.empty(torch.cuda.get_device_properties(dev).total_memory, dtype=torch.uint8,
                    device=dev)
    except torch.OutOfMemoryError:
        pass
    del held
    torch.cuda.empty_cache()


def run_expandable_oom(torch, dev):
    run_retry_oom(torch, dev)


def child(name, pickle_path, device):
    import torch  # noqa: PLC0415 (only the child needs torch)

    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    # Before the first CUDA allocation: the history must be complete. No
    # tracebacks (context=None): the converter drops them, and gathering them
    # in the autograd thread under activation checkpointing fails in torch 2.11
    # ("run_backward ... returned NULL without setting an exception").
    torch.cuda.memory._record_memory_history(context=None, max_entries=MAX_ENTRIES)
    globals()["run_" + name](torch, dev)
    torch.cuda.synchronize(dev)
    torch.cuda.memory._dump_snapshot(pickle_path)
    torch.cuda.memory._record_memory_history(enabled=None)
    stats = torch.cuda.memory_stats(dev)
    print(json.dumps({
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(dev),
        "total_memory": torch.cuda.get_device_properties(dev).total_memory,
        "peak_allocated_bytes": stats["allocated_bytes.all.peak"],
        "peak_reserved_bytes": stats["reserved_bytes.all.peak"],
        "num_alloc_retries": stats["num_alloc_retries"],
        "num_ooms": stats["num_ooms"],
    }))


# --- parent: run, convert, replay ----------------------------------------

def record(name, out, device):
    conf, _ = WORKLOADS[name]
    env = dict(os.environ)
    env.pop("PYTORCH_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    pickle_path = os.path.join(out, name + ".pickle")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                        "--pickle", pickle_path, "--device", str(device)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (name, r.stderr.strip()))
    info = json.loads(r.stdout.strip().splitlines()[-1])
    info["alloc_conf"] = conf
    json_path = os.path.join(out, name + ".json")
    doc = converter.convert(converter.load_snapshot(pickle_path), None,
                            os.path.basename(pickle_path), info["total_memory"])
    converter.write_atomic(json_path, converter.dumps(doc))
    info["trace_entries"] = len(doc["trace"])
    return info, json_path


def replay(prism, json_path):
    report = json_path[:-len(".json")] + ".report.json"
    r = subprocess.run([prism, "memory", "replay", json_path, "--report", report],
                       capture_output=True, text=True)
    if r.returncode not in (0, 5):
        return {"exit": r.returncode, "error": r.stderr.strip()}
    with open(report) as f:
        rep = json.load(f)
    return {"exit": r.returncode, "match": rep["match"],
            "events": "%d/%d" % (rep["events_matched"], rep["events"]),
            "first_divergence": (rep["first_divergence"] or {}).get("text"),
            "recorded_peaks": [rep["recorded"]["peak_allocated_bytes"],
                               rep["recorded"]["peak_reserved_bytes"]],
            "modelled_peaks": [rep["modelled"]["peak_allocated_bytes"],
                               rep["modelled"]["peak_reserved_bytes"]]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="directory for the pickles, JSON traces and manifest")
    parser.add_argument("--only", help="comma-separated workloads (default: all)")
    parser.add_argument("--device", type=int, default=0, help="CUDA device (default 0)")
    parser.add_argument("--prism", help="a built prism binary: replay each trace with it")
    parser.add_argument("--list", action="store_true", help="list the workloads and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--pickle", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        child(args.child, args.pickle, args.device)
        return 0
    if args.list:
        for name, (conf, what) in WORKLOADS.items():
            print("%-18s %-28s %s" % (name, conf or "(default settings)", what))
        return 0
    if not args.out:
        parser.error("--out DIR is required")
    names = args.only.split(",") if args.only else list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error("unknown workload %s (see --list)" % ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)

    manifest, failed = {}, False
    for name in names:
        try:
            info, json_path = record(name, args.out, args.device)
        except (RuntimeError, converter.SnapshotError, OSError) as e:
            print("error: %s" % e, file=sys.stderr)
            manifest[name] = {"error": str(e)}
            failed = True
            continue
        if args.prism:
            info["replay"] = replay(args.prism, json_path)
            failed = failed or info["replay"]["exit"] != 0
            # The peaks prism rebuilds from the trace must be torch's own.
            torch_peaks = [info["peak_allocated_bytes"], info["peak_reserved_bytes"]]
            if info["replay"].get("recorded_peaks") not in (None, torch_peaks):
                print("error: %s: peaks rebuilt from the trace %s differ from "
                      "torch.cuda.memory_stats() %s" % (name, info["replay"]["recorded_peaks"],
                                                         torch_peaks), file=sys.stderr)
                failed = True
        manifest[name] = info
        line = "%-18s %7d entries  peak allocated %12d  reserved %12d" % (
            name, info["trace_entries"], info["peak_allocated_bytes"], info["peak_reserved_bytes"])
        if "replay" in info:
            rep = info["replay"]
            line += "  replay: " + ("match" if rep.get("match") else
                                    "DIVERGES %s" % (rep.get("first_divergence") or
                                                     rep.get("error", "")))
        print(line, flush=True)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
