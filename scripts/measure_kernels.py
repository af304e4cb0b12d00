#!/usr/bin/env python3
"""Measure GPU kernel times with PyTorch and write PrismLLM's kernel database.

Input: kernel signatures (src/compute/kernel.h) from one or more files, each
either a CSV with a `signature` column (the kernel-db format
`gpu,signature,us,source`, e.g. the list `prism simulate --kernels FILE`
writes) or one signature per line (blank lines and `#` comments skipped).
The union of their unique signatures is measured, each once (so one run
covers several jobs: the validation jobs' lists together); the output is the
kernel-db CSV (src/compute/kernel_db.h), sorted by signature:

    gpu,signature,us,source
    H100-SXM5-80GB,gemm bf16 m=8192 n=8192 k=8192,1512.30,measure_kernels.py torch 2.5.1 2026-11-23

What runs for each kind:
  gemm bf16 m n k            torch.matmul, A[m,k] x B[k,n]
  gemm bf16 ... batch=N      torch.bmm on [N,m,k] x [N,k,n] (grouped experts of equal shape)
  gemm fp8 ...               torch._scaled_mm, e4m3 x e4m3 -> bf16, B column-major,
                             unit scales; batch=N is N calls in a row (no batched
                             _scaled_mm). Skipped with a warning where unsupported.
  gemm bf16 ... acc=fp32     C[m,n] fp32 += A B (a weight gradient added into
                             main_grad): torch.addmm(C, A, B, out_dtype=float32,
                             out=C), batch=N torch.baddbmm the same way
                             (aten::addmm.dtype_out, CUDA only: skipped on CPU);
                             if torch refuses out=C, the allocating form
                             (a fresh fp32 C written, not read) and the source
                             column says "allocating".
  gemm bf16 ... acc=bf16     torch.addmm(C, A, B, out=C) / torch.baddbmm, C bf16.
  gemm fp8 ... acc=T         torch._scaled_mm with out_dtype T: it cannot
                             accumulate, so C is written, not read (the time
                             misses one read of C).
  attn_fwd / attn_bwd        F.scaled_dot_product_attention on [b,h,s,d] bf16,
                             flash backend forced on CUDA; GQA with enable_gqa=True
                             (torch >= 2.5), else kv heads repeated before timing.
                             `causal` with sq != skv is bottom-right aligned as in
                             PrismLLM (causal_lower_right, flash or mem-efficient).
                             attn_bwd times torch.autograd.grad of the output alone
                             (graph retained, no grad accumulation).
  mem OP bytes=N             skipped (modelled from bandwidth) unless --measure-mem,
                             which times a device copy reading N/2 and writing N/2 bytes.

--dry-run prints the plan, one line per signature: the signature, a tab, and
what would run for it (the calls above) or why it would be skipped; it needs
no torch and no GPU.

--profile FILE also records the measurement with torch.profiler (CPU and
CUDA, record_shapes=True), written as a Kineto trace to FILE: on a GPU
every call (warm-ups and repeats; collecting some calls only, by toggling
the profiler, left no GPU kernel in the trace with torch 2.11); on the CPU
three more calls of each GEMM and attention kernel after its timing,
collected alone (torch >= 2.3). `prism calibrate kineto FILE`
turns it into the same database from the kernels' own device times, a
cross-check of the CUDA-event timing. A profile of a
real training step (the in-situ calibration) is taken the same way around
one or two steps of the training loop (docs/kineto.md, "Kernel times from a
trace").

Timing: CUDA events around each call, --warmup calls first, the median of
--repeats; the timed calls are queued back to back (one synchronize at the
end), as kernels run in a training step. --flush-l2 overwrites a 256 MiB
buffer before each timed call.
On --device cpu (for testing) time.perf_counter replaces the events.

torch is imported only when something is measured, so --help and --dry-run
work without it.
"""

import argparse
import csv
import datetime
import io
import os
import statistics
import sys
import tempfile
import time

# kernel_signatures.py sits beside this script (also when it is loaded by path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_signatures import (db_gpu_name, parse_signature, plan,  # noqa: E402
                               read_signatures, read_signatures_from)

L2_FLUSH_BYTES = 256 << 20


# ----------------------------------------------------------------------------
# Measurement


class Skip(Exception):
    """A kernel that cannot be measured here; the message says why."""


class Timer:
    """Times a callable: warmup, then the median of repeats (microseconds)."""

    def __init__(self, torch, device, warmup, repeats, flush_l2, timeout_s):
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.device = device
        self.warmup = warmup
        self.repeats = repeats
        self.timeout_s = timeout_s
        self.flush_buf = None
        self.prof = None  # a torch.profiler.profile for --profile, collecting only when asked
        self.prof_activities = []
        self.profile_next = False
        if flush_l2 and self.cuda:
            self.flush_buf = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)

    def _once(self, fn):
        if self.flush_buf is not None:
            self.flush_buf.zero_()
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e3
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6

    def _timed_cuda(self, fn, repeats):
        # All calls are queued before one synchronize, each between its own
        # pair of events, so the GPU runs them back to back as in a training
        # step; a synchronize per call leaves it idle in between and reads
        # ~10% slower for large GEMMs.
        torch = self.torch
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(repeats)]
        for start, end in events:
            if self.flush_buf is not None:
                self.flush_buf.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in events]

    def median_us(self, fn):
        # A running kernel cannot be interrupted, so the timeout is a budget:
        # warmup and repeats are cut to fit it, with at least one timed call.
        t_start = time.perf_counter()
        first = self._once(fn)
        budget_us = self.timeout_s * 1e6 if self.timeout_s else float("inf")
        per_call = max(first, 1.0)
        calls_left = max(int((budget_us - (time.perf_counter() - t_start) * 1e6) / per_call), 1)
        warmup = min(max(self.warmup - 1, 0), calls_left // 3)
        repeats = max(min(self.repeats, calls_left - warmup), 1)
        for _ in range(warmup):
            fn()
        if self.cuda:
            us = statistics.median(self._timed_cuda(fn, repeats))
        else:
            us = statistics.median(self._once(fn) for _ in range(repeats))
        self._profiled(fn)
        return us

    PROFILED_CALLS = 3

    def _profiled(self, fn):
        # --profile: three more calls with the profiler collecting, so the
        # trace holds each kernel a few times, not every warm-up and repeat.
        if self.prof is None or not self.profile_next:
            return
        self.prof.toggle_collection_dynamic(True, self.prof_activities)
        for _ in range(self.PROFILED_CALLS):
            fn()
        if self.cuda:
            self.torch.cuda.synchronize()
        self.prof.toggle_collection_dynamic(False, self.prof_activities)


class Measurer:
    def __init__(self, torch, args):
        self.torch = torch
        self.args = args
        self.device = torch.device(args.device)
        self.timer = Timer(torch, self.device, args.warmup, args.repeats, args.flush_l2,
                           args.timeout_per_kernel)
        self.gqa_native = self._has_enable_gqa()
        self.gqa_note_done = False
        self.last_backend = ""  # the backend or form of the last measurement (source column)

    def _has_enable_gqa(self):
        v = self.torch.__version__.split("+")[0].split(".")
        try:
            return (int(v[0]), int(v[1])) >= (2, 5)
        except (ValueError, IndexError):
            return False

    def measure(self, sig):
        self.last_backend = ""
        self.timer.profile_next = sig.kind != "mem"  # a copy has no signature in a trace
        if sig.kind == "gemm":
            return self._gemm(sig)
        if sig.kind.startswith("attn"):
            return self._attention(sig)
        return self._mem(sig)

    def _randn(self, *shape, dtype=None):
        t = self.torch
        return t.randn(*shape, device=self.device, dtype=dtype or t.bfloat16)

    def _gemm(self, sig):
        t = self.torch
        m, n, k, batch = sig.get("m"), sig.get("n"), sig.get("k"), sig.get("batch", 1)
        if sig.dtype == "bf16" and sig.acc is not None:
            return self._gemm_accumulate(sig)
        if sig.dtype == "bf16":
            if batch > 1:
                a, b = self._randn(batch, m, k), self._randn(batch, k, n)
                return self.timer.median_us(lambda: t.bmm(a, b))
            a, b = self._randn(m, k), self._randn(k, n)
            return self.timer.median_us(lambda: t.matmul(a, b))
        # fp8 e4m3: A row-major [m,k], B column-major [k,n] (a transposed [n,k]).
        if self.device.type != "cuda" or not hasattr(t, "float8_e4m3fn") or not hasattr(
                t, "_scaled_mm"):
            raise Skip("fp8 GEMM needs CUDA and torch._scaled_mm")
        if m % 16 or n % 16 or k % 16:
            raise Skip("fp8 GEMM needs m, n, k multiples of 16")
        fp8 = t.float8_e4m3fn
        a = [self._randn(m, k).to(fp8) for _ in range(batch)]
        b = [self._randn(n, k).to(fp8).t() for _ in range(batch)]
        one = t.tensor(1.0, device=self.device, dtype=t.float32)

        # An accumulating GEMM (acc=T) writes T: _scaled_mm cannot read C.
        out_dtype = t.float32 if sig.acc == "fp32" else t.bfloat16

        def run():
            for i in range(batch):
                t._scaled_mm(a[i], b[i], scale_a=one, scale_b=one, out_dtype=out_dtype)

        try:
            run()
        except (RuntimeError, TypeError) as e:
            if _is_oom(t, e):
                raise
            raise Skip("torch._scaled_mm failed: %s" % str(e).splitlines()[0])
        return self.timer.median_us(run)

    def _gemm_accumulate(self, sig):
        """C += A B in C's type (cuBLAS beta = 1), as main_grad receives a
        weight gradient; bf16 inputs."""
        t = self.torch
        m, n, k, batch = sig.get("m"), sig.get("n"), sig.get("k"), sig.get("batch", 1)
        op = t.baddbmm if batch > 1 else t.addmm
        lead = (batch,) if batch > 1 else ()
        a, b = self._randn(*lead, m, k), self._randn(*lead, k, n)
        if sig.acc == "bf16":
            c = t.zeros(*lead, m, n, device=self.device, dtype=t.bfloat16)
            return self.timer.median_us(lambda: op(c, a, b, out=c))
        # bf16 x bf16 -> fp32 output: aten::addmm.dtype / baddbmm.dtype exist
        # on CUDA only; never called on another device.
        if self.device.type != "cuda":
            raise Skip("acc=fp32 needs CUDA (aten::addmm.dtype_out)")
        c = t.zeros(*lead, m, n, device=self.device, dtype=t.float32)
        try:
            op(c, a, b, out_dtype=t.float32, out=c)
            self.last_backend = "addmm in place" if batch == 1 else "baddbmm in place"
            return self.timer.median_us(lambda: op(c, a, b, out_dtype=t.float32, out=c))
        except (RuntimeError, TypeError) as e:
            if _is_oom(t, e):
                raise
            log("%s: out=C refused (%s); timing the allocating form" %
                (sig.text, str(e).splitlines()[0]))
        try:
            op(c, a, b, out_dtype=t.float32)
        except (RuntimeError, TypeError) as e:
            if _is_oom(t, e):
                raise
            raise Skip("%s out_dtype=float32 failed: %s" %
                       (op.__name__, str(e).splitlines()[0]))
        self.last_backend = "addmm allocating" if batch == 1 else "baddbmm allocating"
        return self.timer.median_us(lambda: op(c, a, b, out_dtype=t.float32))

    def _attention(self, sig):
        t = self.torch
        F = t.nn.functional
        if not hasattr(F, "scaled_dot_product_attention"):
            raise Skip("needs torch >= 2.0 (scaled_dot_product_attention)")
        if sig.dtype != "bf16":
            raise Skip("only bf16 attention is measured")
        b, hq, hkv = sig.get("b"), sig.get("hq"), sig.get("hkv")
        sq, skv, d = sig.get("sq"), sig.get("skv"), sig.get("d")
        backward = sig.kind == "attn_bwd"
        q = self._randn(b, hq, sq, d).requires_grad_(backward)
        k = self._randn(b, hkv, skv, d).requires_grad_(backward)
        v = self._randn(b, hkv, skv, d).requires_grad_(backward)
        kwargs = {"is_causal": sig.causal}
        lower_right = sig.causal and sq != skv
        if lower_right:
            # PrismLLM's causal mask is bottom-right aligned (query i sees keys
            # up to i + skv - sq); is_causal is top-left aligned when sq != skv.
            try:
                from torch.nn.attention.bias import causal_lower_right
            except ImportError:
                raise Skip("causal with sq != skv needs torch >= 2.3 (causal_lower_right)")
            kwargs = {"attn_mask": causal_lower_right(sq, skv)}
        if hkv != hq:
            if self.gqa_native:
                kwargs["enable_gqa"] = True
            else:
                # Repeating kv heads is outside the timed region for the forward
                # pass but the backward then also reduces over the copies.
                rep = hq // hkv
                k = k.detach().repeat_interleave(rep, dim=1).requires_grad_(backward)
                v = v.detach().repeat_interleave(rep, dim=1).requires_grad_(backward)
            if not self.gqa_note_done:
                self.gqa_note_done = True
                log("note: GQA via %s" % ("enable_gqa=True" if self.gqa_native
                                          else "repeated kv heads (torch < 2.5)"))
        def run(backend, q, k, v, kwargs):
            with self._sdpa_context(backend, allow_efficient=lower_right):
                if not backward:
                    with t.no_grad():
                        return self.timer.median_us(lambda: F.scaled_dot_product_attention(
                            q, k, v, **kwargs))
                out = F.scaled_dot_product_attention(q, k, v, **kwargs)
                grad = t.randn_like(out)
                return self.timer.median_us(lambda: t.autograd.grad(
                    out, (q, k, v), grad, retain_graph=True))

        # cuDNN's fused attention is what Transformer Engine (Megatron-Core on
        # Hopper and Blackwell) runs; where cuDNN refuses a shape (or GQA),
        # repeat the kv heads for it, and fall back to FlashAttention-2 last.
        if self.args.attention_backend == "cudnn" and self.device.type == "cuda":
            tries = [(q, k, v, kwargs)]
            if hkv != hq and "enable_gqa" in kwargs:
                rep = hq // hkv
                k2 = k.detach().repeat_interleave(rep, dim=1).requires_grad_(backward)
                v2 = v.detach().repeat_interleave(rep, dim=1).requires_grad_(backward)
                kw2 = {key: val for key, val in kwargs.items() if key != "enable_gqa"}
                tries.append((q, k2, v2, kw2))
            for qq, kk, vv, kw in tries:
                try:
                    us = run("cudnn", qq, kk, vv, kw)
                    self.last_backend = "sdpa-cudnn" + ("" if kk is k else " repeated-kv")
                    return us
                except RuntimeError:
                    continue
        self.last_backend = "sdpa-flash"
        return run("flash", q, k, v, kwargs)

    def _sdpa_context(self, backend="flash", allow_efficient=False):
        # Flash only, so a shape flash cannot run fails instead of silently
        # timing the math backend; a lower-right causal mask may also use the
        # memory-efficient kernel, which supports it for every shape.
        import contextlib
        if self.device.type != "cuda":
            return contextlib.nullcontext()
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            if backend == "cudnn":
                return sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
            backends = [SDPBackend.FLASH_ATTENTION]
            if allow_efficient:
                backends.append(SDPBackend.EFFICIENT_ATTENTION)
            return sdpa_kernel(backends)
        except ImportError:  # torch 2.0-2.2
            return self.torch.backends.cuda.sdp_kernel(
                enable_flash=True, enable_math=False, enable_mem_efficient=allow_efficient)

    def _mem(self, sig):
        if not self.args.measure_mem:
            raise Skip("memory-bound kernels are modelled (use --measure-mem to time a copy)")
        t = self.torch
        half = max(sig.get("bytes") // 2, 1)
        src = t.empty(half, dtype=t.uint8, device=self.device)
        dst = t.empty(half, dtype=t.uint8, device=self.device)
        return self.timer.median_us(lambda: dst.copy_(src))


def _is_oom(torch, e):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(e, oom):
        return True
    return "out of memory" in str(e).lower()


# ----------------------------------------------------------------------------
# Output


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def write_csv(path, gpu, results):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["gpu", "signature", "us", "source"])
    for sig, (us, source) in sorted(results.items()):
        w.writerow([gpu, sig, "%.2f" % us, source])
    if path is None or path == "-":
        sys.stdout.write(buf.getvalue())
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".measure_kernels.", suffix=".csv", dir=directory)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Measure kernel times with PyTorch; write PrismLLM's kernel-db CSV "
        "(gpu,signature,us,source).")
    p.add_argument("input", nargs="+",
                   help="kernel-db CSV (signature column) or one signature per line; - for stdin; "
                        "several: the union of their signatures")
    p.add_argument("--out", help="output CSV (written atomically); default: stdout")
    p.add_argument("--gpu", help="GPU name in the database (H100-SXM5-80GB, H200-SXM-141GB, "
                   "A100-SXM4-80GB, B200-SXM-180GB, ...); default: from the device")
    p.add_argument("--device", default="cuda", help="torch device: cuda (default), cuda:N or cpu")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    p.add_argument("--repeats", type=int, default=20, help="timed calls; the median is kept (default 20)")
    p.add_argument("--attention-backend", choices=["cudnn", "flash"], default="cudnn",
                   help="SDPA backend for attention: cudnn (fused attention, as Transformer "
                        "Engine runs it; default) or flash (FlashAttention-2); shapes cuDNN "
                        "refuses fall back to flash")
    p.add_argument("--flush-l2", action="store_true", help="overwrite 256 MiB before each timed call")
    p.add_argument("--measure-mem", action="store_true",
                   help="time `mem OP bytes=N` kernels as a device copy of N bytes of traffic")
    p.add_argument("--limit", type=int, help="measure only the first N signatures (sorted)")
    p.add_argument("--timeout-per-kernel", type=float, default=30.0,
                   help="seconds per kernel; warmup and repeats are cut to fit (default 30)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (each signature and what would run for it, or why it "
                        "would be skipped); needs no torch")
    p.add_argument("--profile", metavar="FILE",
                   help="also write a torch.profiler (Kineto) trace of the measurement, with "
                        "shapes, to FILE (input of `prism calibrate kineto`)")
    args = p.parse_args(argv)
    if args.warmup < 0 or args.repeats < 1:
        p.error("--warmup must be >= 0 and --repeats >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        texts = read_signatures_from(args.input)
    except OSError as e:
        log("error: %s" % e)
        return 2
    sigs = []
    for text in texts:
        try:
            sigs.append(parse_signature(text))
        except ValueError as e:
            log("warning: skipping '%s': %s" % (text, e))
    if args.limit is not None:
        sigs = sigs[:args.limit]
    if args.dry_run:
        plans = [plan(s, args.measure_mem) for s in sigs]
        for s, what in zip(sigs, plans):
            print("%s\t%s" % (s.text, what))
        log("%d signatures (%d gemm, %d attention, %d mem) from %d input%s: %d to measure, "
            "%d to skip" % (
                len(sigs), sum(s.kind == "gemm" for s in sigs),
                sum(s.kind.startswith("attn") for s in sigs), sum(s.kind == "mem" for s in sigs),
                len(args.input), "" if len(args.input) == 1 else "s",
                sum(not p.startswith("skip") for p in plans),
                sum(p.startswith("skip") for p in plans)))
        return 0

    try:
        import torch
    except ImportError:
        log("error: PyTorch is not installed (use --dry-run to only parse the input)")
        return 2
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            log("error: no CUDA device (use --device cpu to test)")
            return 2
        props = torch.cuda.get_device_properties(device)
        gpu = args.gpu or db_gpu_name(props.name, props.total_memory)
        if gpu is None:
            log("error: no database name for '%s' (%.0f GB); pass --gpu" % (
                props.name, props.total_memory / 1e9))
            return 2
        log("device: %s (%.0f GB) -> %s, torch %s, CUDA %s" % (
            props.name, props.total_memory / 1e9, gpu, torch.__version__, torch.version.cuda))
    else:
        gpu = args.gpu or "cpu"
        log("device: %s, torch %s" % (args.device, torch.__version__))
    source = "measure_kernels.py torch %s %s" % (torch.__version__.split("+")[0],
                                                 datetime.date.today().isoformat())

    measurer = Measurer(torch, args)
    results = {}
    n = len(sigs)
    prof = None
    if args.profile:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts, record_shapes=True)
        prof.__enter__()
        # On the CPU the collection is toggled around three calls per kernel
        # (torch >= 2.3; else all calls). With CUDA on, toggling left no GPU
        # kernel in the trace (torch 2.11 on an H200, 2026-11-27, with or
        # without acc_events): there the trace holds every call, warm-ups
        # and repeats too, and `prism calibrate kineto` takes the median.
        if hasattr(prof, "toggle_collection_dynamic") and device.type != "cuda":
            prof.toggle_collection_dynamic(False, acts)
            measurer.timer.prof, measurer.timer.prof_activities = prof, acts
    for i, sig in enumerate(sigs, 1):
        try:
            us = measurer.measure(sig)
            row_source = source + (" " + measurer.last_backend if measurer.last_backend else "")
            results[sig.text] = (us, row_source)
            log("[%d/%d] %s %.1f us %s" % (i, n, sig.text, us, measurer.last_backend))
        except Skip as e:
            log("[%d/%d] %s skipped: %s" % (i, n, sig.text, e))
        except (RuntimeError, MemoryError) as e:
            if not _is_oom(torch, e) and not isinstance(e, MemoryError):
                log("[%d/%d] %s failed: %s" % (i, n, sig.text, str(e).splitlines()[0]))
            else:
                log("[%d/%d] %s skipped: out of memory" % (i, n, sig.text))
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(args.profile + ".tmp")
        os.replace(args.profile + ".tmp", args.profile)
        log("profile: %s (prism calibrate kineto %s -o FILE)" % (args.profile, args.profile))
    write_csv(args.out, gpu, results)
    log("%d of %d kernels measured%s" % (len(results), n,
                                         " -> " + args.out if args.out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
