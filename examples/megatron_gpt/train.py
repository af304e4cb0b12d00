"""Megatron-Core's GPT (local transformer spec: no Transformer Engine) trained
with Megatron-Core's own 1F1B pipeline schedule: the GPU check's (b)
(scripts/gpu/check.sh, docs/gpu.md), one pipeline stage's rank of a TP1 PP4
job run through the NCCL drop-in:

    prism emulate examples/jobs/megatron-gpt-pp4-1024.yaml --real-ranks 5 -- \
        env LD_PRELOAD=$PWD/lib/libnccl.so.2 PRISM_NCCL_DROPIN=1 \
        PYTHONPATH=SITE:$PYTHONPATH python3 examples/megatron_gpt/train.py

(SITE: where megatron-core's wheel was unpacked.) Data parallelism: the
gradients are all-reduced over Megatron's data-parallel group after each
step (no Megatron DDP or optimizer, which want apex or Transformer Engine);
torch's AdamW steps. Prints `GPU_STATS {json}` as examples/cuda_gpt does.

Written for megatron-core 0.16.1. Its CPU path (--device cpu, gloo, world
size 1: PP1) runs; on an H200 (2026-11-27, docs/gpu.md) five runs found
three causes (gloo groups, an fp32 LayerNorm, and, with --stacks-after and
the store's trace, stages 1-3 waiting forever for a virtual root's NCCL id
under torch 2.11's nested group keys): it has not yet run to the end there.
"""

import argparse
import faulthandler
import json
import os
import statistics
import time
from functools import partial

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--pp", type=int, default=4, help="pipeline-parallel size (1 when the world is 1)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--stacks-after", type=float, default=0, metavar="SECONDS",
                   help="print every thread's Python stack to stderr after SECONDS (0: never), "
                        "to see where a rank waits")
    args = p.parse_args()
    if args.stacks_after > 0:
        faulthandler.dump_traceback_later(args.stacks_after, exit=False)

    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29535"))
    cuda = args.device.startswith("cuda")
    if cuda:
        if not torch.cuda.is_available():
            raise SystemExit("megatron_gpt/train.py: --device cuda but no CUDA device")
        torch.cuda.set_device(0)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.transformer_config import TransformerConfig

    pp = min(args.pp, world)
    # No gloo groups: gloo connects to every member for real, and under the
    # emulation the other members are virtual (it would wait for them forever).
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1,
                                             pipeline_model_parallel_size=pp,
                                             create_gloo_process_groups=False)
    if cuda:
        model_parallel_cuda_manual_seed(0)
    dtype = torch.bfloat16 if cuda else torch.float32
    config = TransformerConfig(num_layers=args.layers, hidden_size=args.dim,
                               num_attention_heads=args.heads, use_cpu_initialization=True,
                               pipeline_dtype=dtype, bf16=cuda, params_dtype=dtype)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=args.vocab, max_sequence_length=args.seq,
                     pre_process=parallel_state.is_pipeline_first_stage(),
                     post_process=parallel_state.is_pipeline_last_stage()).to(device)
    if cuda:
        # As Megatron's training loop does for --bf16: every parameter in bf16
        # (torch's LayerNorm, the fallback without Apex, would stay fp32),
        # inputs cast on the first stage and outputs made fp32 on the last.
        from megatron.core.transformer.module import Float16Module
        model = Float16Module(config, model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dp_group = parallel_state.get_data_parallel_group()
    mask = (torch.tril(torch.ones(args.seq, args.seq, device=device)) < 0.5).view(1, 1, args.seq, args.seq)
    positions = torch.arange(args.seq, device=device).unsqueeze(0).expand(args.micro_batch, -1)

    def batches():
        while True:
            tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq), device=device)
            yield {"tokens": tokens, "labels": torch.roll(tokens, -1, 1)}

    def loss_func(output_tensor):
        loss = output_tensor.float().mean()
        return loss, {"lm loss": loss}

    def forward_step(data_iterator, model):
        data = next(data_iterator)
        out = model(data["tokens"], positions, mask, labels=data["labels"])
        return out, loss_func

    forward_backward = get_forward_backward_func()
    data = batches()
    step_ms = []
    for step in range(args.steps):
        wall = time.perf_counter()
        if cuda:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        losses = forward_backward(forward_step_func=forward_step, data_iterator=data, model=model,
                                  num_microbatches=args.microbatches, seq_length=args.seq,
                                  micro_batch_size=args.micro_batch, forward_only=False)
        if dist.get_world_size(dp_group) > 1:
            for prm in model.parameters():
                if prm.grad is not None:
                    dist.all_reduce(prm.grad, group=dp_group)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            end.record()
            end.synchronize()
            ms = begin.elapsed_time(end)
        else:
            ms = (time.perf_counter() - wall) * 1e3
        step_ms.append(ms)
        loss = losses[0]["lm loss"].item() if losses else float("nan")
        print(f"step {step} stage {parallel_state.get_pipeline_model_parallel_rank()} "
              f"loss {loss:.4f} gpu {ms:.2f} ms", flush=True)
    kept = step_ms[args.warmup:] or step_ms
    faulthandler.cancel_dump_traceback_later()
    print("GPU_STATS " + json.dumps({
        "program": "megatron_gpt", "rank": rank, "world": world, "pp": pp,
        "stage": parallel_state.get_pipeline_model_parallel_rank(), "step_ms": step_ms,
        "median_step_ms": statistics.median(kept),
        "max_memory_reserved": torch.cuda.max_memory_reserved() if cuda else 0}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
