#!/usr/bin/env python3
"""Writes gpu_step.json: a Kineto trace of two training steps as torch 2.11
writes it on CUDA, for `prism calibrate kineto` (tests/kineto/kernel_calibration_test.cc).

No GPU here, so the host side is real and the device side is added: a real
torch 2.11 CPU profile (record_shapes=True, two ProfilerSteps) of a small
block's forward and backward in bf16 (a LayerNorm; a linear without bias: aten::matmul ->
aten::mm; causal GQA attention through scaled_dot_product_attention; a linear
with bias: aten::addmm; a batched GEMM: aten::bmm; an fp8 GEMM:
aten::_scaled_mm; GELU), then, as on CUDA:
  - the CPU attention kernels renamed to the CUDA flash ops with their CUDA
    schemas (aten::_scaled_dot_product_flash_attention[_backward], the
    autograd node ScaledDotProductFlashAttentionBackward0);
  - under each op that launches GPU work a `cuda_runtime` cudaLaunchKernel
    (args External id, cbid, correlation) and its `kernel` on stream 7 (args
    External id, device, stream, correlation, grid, block, ...), with the
    ac2g flow pair; the flash backward launches three kernels;
  - one NCCL all-reduce kernel, and the H100's deviceProperties.
Kernel durations are fixed by rule (below), so the expected medians are
known: step 1's kernels take 10% longer than step 0's.

Run: /work/main/.venv/bin/python tests/data/kineto/make_gpu_step.py
"""

import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# Base kernel time (us) in step 0 of each launching op, by name.
BASE_US = {
    "aten::mm": 12.0,
    "aten::addmm": 20.0,
    "aten::bmm": 30.0,
    "aten::_scaled_mm": 8.0,
    "aten::_scaled_dot_product_flash_attention": 50.0,
    "aten::gelu": 3.0,
    "aten::native_layer_norm": 2.5,
    "aten::gelu_backward": 4.0,
    "aten::add_": 1.5,
    "aten::copy_": 2.0,
    "aten::fill_": 1.0,
}
# Ops launching several kernels (us in step 0).
LN_BWD_US = [("void at::native::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>", 3.0),
             ("void at::native::GammaBetaBackwardCUDAKernelTemplate<c10::BFloat16, float>", 1.5)]
FLASH_BWD_US = [("flash_bwd_dot_do_o_kernel", 5.0), ("flash_bwd_kernel", 100.0),
                ("flash_bwd_convert_dq_kernel", 7.0)]
KERNEL_NAME = {
    "aten::mm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "aten::addmm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1",
    "aten::bmm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_batched",
    "aten::_scaled_mm": "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_cublasLt",
    "aten::_scaled_dot_product_flash_attention":
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false>>",
    "aten::gelu": "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>",
    "aten::native_layer_norm": "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>",
    "aten::gelu_backward": "void at::native::vectorized_elementwise_kernel<4, GeluBackward>",
    "aten::add_": "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<c10::BFloat16>>",
    "aten::copy_": "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
    "aten::fill_": "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>",
}
STREAM = 7


def profile_step(path):
    torch.manual_seed(0)
    bf = torch.bfloat16
    b, s, h, hq, hkv, d = 2, 16, 64, 4, 2, 16
    norm = torch.nn.LayerNorm(h, dtype=bf)
    wqkv = torch.randn(h + 2 * hkv * d, h, dtype=bf, requires_grad=True)  # q: hq*d = h
    proj = torch.nn.Linear(h, h, dtype=bf)
    w_up = torch.randn(4, h // 4, 32, dtype=bf, requires_grad=True)
    a8 = torch.randn(32, 64).to(torch.float8_e4m3fn)
    b8 = torch.randn(48, 64).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)
    sched = torch.profiler.schedule(wait=0, warmup=0, active=2, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True, schedule=sched) as prof:
        for _ in range(2):
            x = torch.randn(b, s, h, dtype=bf, requires_grad=True)
            qkv = F.linear(norm(x), wqkv)  # aten::linear -> aten::matmul -> aten::mm
            q, k, v = qkv.split([h, hkv * d, hkv * d], dim=-1)
            q = q.view(b, s, hq, d).transpose(1, 2)
            k = k.view(b, s, hkv, d).transpose(1, 2)
            v = v.view(b, s, hkv, d).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            y = proj(o.transpose(1, 2).reshape(b * s, h))  # aten::linear -> aten::addmm
            z = torch.bmm(y.view(b * s, 4, h // 4).transpose(0, 1), w_up)  # aten::bmm
            loss = F.gelu(z).float().sum()
            loss.backward()
            torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=bf)
            prof.step()
    prof.export_chrome_trace(path)


def cuda_attention_args(ev):
    """The CPU flash ops' args rewritten to the CUDA flash ops' schemas."""
    a = ev["args"]
    dims, types, conc = a["Input Dims"], a["Input type"], a["Concrete Inputs"]
    strides = a.get("Input Strides")
    if ev["name"] == "aten::_scaled_dot_product_flash_attention_for_cpu":
        # cpu (q, k, v, dropout_p, is_causal, attn_mask, scale)
        # cuda (q, k, v, dropout_p, is_causal, return_debug_mask, scale)
        ev["name"] = "aten::_scaled_dot_product_flash_attention"
        dims[5], types[5], conc[5] = [], "Scalar", "False"
        if strides:
            strides[5] = []
        return
    # cpu (grad_out, q, k, v, out, logsumexp, dropout_p, is_causal, attn_mask, scale)
    # cuda (grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
    #       dropout_p, is_causal, philox_seed, philox_offset, scale)
    ev["name"] = "aten::_scaled_dot_product_flash_attention_backward"
    pick = lambda lst, fill: lst[:6] + [fill, fill, fill, fill] + lst[6:8] + [fill, fill] + lst[9:10]
    a["Input Dims"] = pick(dims, [])
    a["Input type"] = pick(types, "")
    a["Concrete Inputs"] = pick(conc, "")
    a["Concrete Inputs"][8] = a["Concrete Inputs"][9] = str(dims[1][2])  # max_q, max_k
    a["Input type"][8] = a["Input type"][9] = "Scalar"
    if strides:
        a["Input Strides"] = pick(strides, [])


def main():
    raw = os.path.join(HERE, ".gpu_step_cpu.json")
    profile_step(raw)
    with open(raw) as f:
        doc = json.load(f)
    os.unlink(raw)
    events = doc["traceEvents"]
    steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    t0 = steps[0]["ts"]
    out = []
    for e in events:
        if e.get("ph") == "X":
            e["ts"] = round(e["ts"] - t0, 3)
            e["pid"] = e["tid"] = 4242 if e.get("tid") == e.get("pid") else e["tid"]
        if e.get("name") in ("aten::_scaled_dot_product_flash_attention_for_cpu",
                             "aten::_scaled_dot_product_flash_attention_for_cpu_backward"):
            cuda_attention_args(e)
        if e.get("name", "").startswith("autograd::engine::evaluate_function: ScaledDotProduct"):
            e["name"] = "autograd::engine::evaluate_function: ScaledDotProductFlashAttentionBackward0"
        if e.get("name") == "ScaledDotProductFlashAttentionForCpuBackward0":
            e["name"] = "ScaledDotProductFlashAttentionBackward0"
        out.append(e)
    cpu_ops = sorted((e for e in out if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    step_end = steps[0]["ts"] + steps[0]["dur"]  # already relative to t0
    launchers = [op for op in cpu_ops if op["name"] in BASE_US or op["name"] in (
        "aten::_scaled_dot_product_flash_attention_backward", "aten::native_layer_norm_backward")]
    # An op inside another launcher (the CPU _scaled_mm's own mm and copies)
    # launches nothing of its own, as on CUDA.
    inner = {id(op) for op in launchers for outer in launchers if outer is not op and
             outer["tid"] == op["tid"] and outer["ts"] <= op["ts"] and
             op["ts"] + op["dur"] <= outer["ts"] + outer["dur"]}
    corr = 1000
    gpu_ts = 5.0
    listing = []
    for op in cpu_ops:
        name = op["name"]
        if id(op) in inner:
            continue
        if name == "aten::_scaled_dot_product_flash_attention_backward":
            kernels = FLASH_BWD_US
        elif name == "aten::native_layer_norm_backward":
            kernels = LN_BWD_US
        elif name in BASE_US:
            kernels = [(KERNEL_NAME[name], BASE_US[name])]
        else:
            continue
        scale = 1.0 if op["ts"] < step_end else 1.1
        for i, (kname, us) in enumerate(kernels):
            corr += 1
            dur = round(us * scale, 3)
            launch = round(op["ts"] + min(0.5 + i, op["dur"] / 2), 3)
            gpu_ts = max(gpu_ts, launch + 4.0)
            ext = op["args"]["External id"]
            out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                        "pid": 4242, "tid": op["tid"], "ts": launch, "dur": 1.8,
                        "args": {"External id": ext, "cbid": 211, "correlation": corr}})
            out.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": STREAM,
                        "ts": round(gpu_ts, 3), "dur": dur,
                        "args": {"External id": ext, "queued": 0, "device": 0, "context": 1,
                                 "stream": STREAM, "correlation": corr,
                                 "registers per thread": 168, "shared memory": 213248,
                                 "blocks per SM": 0.969697, "warps per SM": 3.878788,
                                 "grid": [128, 1, 1], "block": [384, 1, 1],
                                 "est. achieved occupancy %": 0}})
            out.append({"ph": "s", "id": corr, "pid": 4242, "tid": op["tid"], "ts": launch,
                        "cat": "ac2g", "name": "ac2g"})
            out.append({"ph": "f", "id": corr, "pid": 0, "tid": STREAM, "ts": round(gpu_ts, 3),
                        "cat": "ac2g", "name": "ac2g", "bp": "e"})
            listing.append("%-55s %-28s %8.3f" % (name, json.dumps(op["args"]["Input Dims"][:3]), dur))
            gpu_ts += dur + 1.0
    # An all-reduce of the gradients on a second stream: left out of the calibration.
    out.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                "pid": 0, "tid": 20, "ts": round(gpu_ts, 3), "dur": 40.0,
                "args": {"device": 0, "stream": 20, "correlation": corr + 1}})
    doc["traceEvents"] = out
    doc["deviceProperties"] = [{
        "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
        "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
        "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
        "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}]
    for key in ("ERROR", "trace_id", "baseTimeNanoseconds"):
        doc.pop(key, None)
    doc["traceName"] = "gpu_step.json"
    with open(os.path.join(HERE, "gpu_step.json"), "w") as f:
        json.dump(doc, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    print("\n".join(listing))
    print("torch", torch.__version__, "->", os.path.join(HERE, "gpu_step.json"), file=sys.stderr)


if __name__ == "__main__":
    main()
