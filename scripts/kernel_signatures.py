"""Kernel signatures as scripts/measure_kernels.py reads them: parsing
(src/compute/kernel.h's format), the union of several input lists, the plan
of what would run for each (--dry-run), and the kernel-db name of the GPU
torch reports. No torch here: --help and --dry-run work without it."""

import csv
import io
import re
import sys

GEMM_DTYPES = ("bf16", "fp8")
# A GEMM's output-accumulate type (`acc=`): C += A B into main_grad.
ACC_DTYPES = ("fp32", "bf16")


# ----------------------------------------------------------------------------
# Signatures


class Signature:
    """One parsed kernel signature; `text` is the key written back out."""

    def __init__(self, text, kind, dtype, fields, causal, op, acc=None):
        self.text = text
        self.kind = kind  # gemm, attn_fwd, attn_bwd, mem
        self.dtype = dtype  # bf16 / fp8 (gemm, attn), None for mem
        self.fields = fields  # name -> int
        self.causal = causal
        self.op = op  # mem op name
        self.acc = acc  # gemm: "fp32" / "bf16" when C is accumulated into, else None

    def get(self, name, default=None):
        return self.fields.get(name, default)


def parse_signature(text):
    """Parses a signature; raises ValueError naming what is wrong."""
    tokens = text.split()
    if not tokens:
        raise ValueError("empty signature")
    kind = tokens[0]
    fields = {}
    causal = False
    dtype = op = acc = None
    if kind in ("gemm", "attn_fwd", "attn_bwd"):
        if len(tokens) < 2 or tokens[1] not in GEMM_DTYPES:
            raise ValueError("expected a dtype (bf16 or fp8) after '%s'" % kind)
        dtype = tokens[1]
        rest = tokens[2:]
    elif kind == "mem":
        if len(tokens) < 2 or "=" in tokens[1]:
            raise ValueError("expected an op name after 'mem'")
        op = tokens[1]
        rest = tokens[2:]
    else:
        raise ValueError("unknown kernel kind '%s'" % kind)
    for tok in rest:
        if tok == "causal" and kind.startswith("attn"):
            causal = True
            continue
        if tok.startswith("acc=") and kind == "gemm":
            if acc is not None:
                raise ValueError("field 'acc' given twice")
            if tok[4:] not in ACC_DTYPES:
                raise ValueError("bad accumulate type '%s' (fp32 or bf16)" % tok[4:])
            acc = tok[4:]
            continue
        m = re.fullmatch(r"([a-z]+)=(\d+)", tok)
        if not m:
            raise ValueError("bad field '%s'" % tok)
        fields[m.group(1)] = int(m.group(2))
    required = {
        "gemm": ("m", "n", "k"),
        "attn_fwd": ("b", "hq", "hkv", "sq", "skv", "d"),
        "attn_bwd": ("b", "hq", "hkv", "sq", "skv", "d"),
        "mem": ("bytes",),
    }[kind]
    allowed = set(required) | ({"batch"} if kind == "gemm" else set())
    for name in required:
        if name not in fields:
            raise ValueError("missing field '%s'" % name)
    for name in fields:
        if name not in allowed:
            raise ValueError("unexpected field '%s' for %s" % (name, kind))
    if kind.startswith("attn") and fields["hq"] % max(fields["hkv"], 1) != 0:
        raise ValueError("hq must be a multiple of hkv")
    return Signature(" ".join(tokens), kind, dtype, fields, causal, op, acc)


def read_signatures_from(paths):
    """The sorted union of the signatures of several inputs."""
    out = set()
    for path in paths:
        out.update(read_signatures(path))
    return sorted(out)


def read_signatures(path):
    """Unique signature strings from a kernel-db CSV or a one-per-line list."""
    with open(path, newline="") if path != "-" else sys.stdin as f:
        text = f.read()
    lines = text.splitlines()
    first = next((l for l in lines if l.strip() and not l.lstrip().startswith("#")), "")
    if "signature" in [c.strip() for c in first.split(",")]:
        rows = csv.DictReader(io.StringIO(text))
        raw = [(r.get("signature") or "").strip() for r in rows]
    else:
        raw = [l.strip() for l in lines]
        raw = [l for l in raw if l and not l.startswith("#")]
    return sorted({" ".join(s.split()) for s in raw if s})


def plan(sig, measure_mem=False):
    """What measure() would run for `sig`, or 'skip: why', without torch."""
    if sig.kind == "gemm":
        m, n, k, batch = sig.get("m"), sig.get("n"), sig.get("k"), sig.get("batch", 1)
        if sig.dtype == "bf16":
            shapes = "[%d,%d,%d]x[%d,%d,%d]" % (batch, m, k, batch, k, n) if batch > 1 \
                else "[%d,%d]x[%d,%d]" % (m, k, k, n)
            if sig.acc is None:
                return ("torch.bmm " if batch > 1 else "torch.matmul ") + shapes
            c = "[%d,%d,%d]" % (batch, m, n) if batch > 1 else "[%d,%d]" % (m, n)
            return "%s %s%s, in place into C%s %s (beta=1)" % (
                "torch.baddbmm" if batch > 1 else "torch.addmm", shapes,
                " out_dtype=fp32" if sig.acc == "fp32" else "", c, sig.acc)
        if m % 16 or n % 16 or k % 16:
            return "skip: fp8 GEMM needs m, n, k multiples of 16"
        return "torch._scaled_mm e4m3 [%d,%d]x[%d,%d] -> %s%s%s" % (
            m, k, k, n, sig.acc or "bf16", " x%d calls" % batch if batch > 1 else "",
            " (C not read: _scaled_mm cannot accumulate)" if sig.acc else "")
    if sig.kind.startswith("attn"):
        if sig.dtype != "bf16":
            return "skip: only bf16 attention is measured"
        mask = "causal_lower_right" if sig.causal and sig.get("sq") != sig.get("skv") else (
            "is_causal" if sig.causal else "no mask")
        return "sdpa %s b=%d hq=%d hkv=%d sq=%d skv=%d d=%d, %s%s" % (
            "backward (autograd.grad)" if sig.kind == "attn_bwd" else "forward",
            sig.get("b"), sig.get("hq"), sig.get("hkv"), sig.get("sq"), sig.get("skv"),
            sig.get("d"), mask, ", enable_gqa" if sig.get("hq") != sig.get("hkv") else "")
    if not measure_mem:
        return "skip: memory-bound kernels are modelled (--measure-mem times a copy)"
    return "device copy of %d bytes" % (max(sig.get("bytes") // 2, 1) * 2)


# ----------------------------------------------------------------------------
# GPU names


def db_gpu_name(device_name, total_bytes):
    """Maps torch.cuda.get_device_name() and memory size to a kernel-db name."""
    name = device_name.upper()
    gb = total_bytes / 1e9
    if "B200" in name:
        return "B200-SXM-180GB"
    if "H200" in name:
        return "H200-SXM-141GB"
    if "H100" in name:
        if "PCIE" in name or "NVL" in name:
            return None  # no preset: ask for --gpu
        return "H100-SXM5-80GB"
    if "A100" in name:
        if "PCIE" in name:
            return None
        return "A100-SXM4-80GB" if gb > 50 else "A100-SXM4-40GB"
    return None
