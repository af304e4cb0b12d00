#!/usr/bin/env python3
"""Convert a PyTorch CUDA memory snapshot pickle to PrismLLM's memory trace.

torch.cuda.memory._record_memory_history(max_entries=N) followed by
torch.cuda.memory._dump_snapshot("x.pickle") writes a pickle of plain
dicts, lists, ints, floats and strings:

    {"segments": [...],            # allocator state at the dump
     "device_traces": [[...], ...], # per device: TraceEntry dicts, in order
     "allocator_settings": {...}}   # recent PyTorch versions

This script keeps one device's history without its stack frames and writes
the JSON that `prism memory replay` reads (docs/memory.md):

    {"format": "prism-memory-trace", "version": 1, "source": "x.pickle",
     "device": 0, "device_total_memory": N (with --device-memory N),
     "allocator_settings": {...} or null,
     "trace": [["alloc", addr, size, stream], ...],
     "final_segments": [...]}

For an "oom" entry the addr column holds torch's device_free. Standard
library only: torch is not needed, and the pickle is read with an
unpickler that refuses every class, so a file that is not a snapshot cannot
run code.

    scripts/memory_snapshot_to_json.py x.pickle -o x.json
    scripts/memory_snapshot_to_json.py x.pickle --device 1 > x1.json
    scripts/memory_snapshot_to_json.py x.pickle --device-memory 85031714816 -o x.json
"""

import argparse
import io
import json
import os
import pickle
import sys
import tempfile

FORMAT = "prism-memory-trace"
VERSION = 1

# Keys of allocator_settings the replay uses; the others (pinned memory,
# release_lock_on_cudamalloc) do not change the allocator's decisions.
SETTINGS_KEYS = ("PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
                 "expandable_segments")
SEGMENT_KEYS = ("address", "total_size", "allocated_size", "active_size", "requested_size",
                "stream", "segment_type", "is_expandable")
BLOCK_KEYS = ("address", "size", "requested_size", "state")


class SnapshotError(Exception):
    """The input is not a usable memory snapshot; the message says why."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise SnapshotError(
            "the pickle refers to %s.%s: a memory snapshot holds only plain dicts and lists"
            % (module, name))


def load_snapshot(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    except SnapshotError:
        raise
    except Exception as e:  # any malformed pickle
        raise SnapshotError("not a pickle (%s: %s)" % (type(e).__name__, e))
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        what = "a dict without 'device_traces'" if isinstance(snapshot, dict) else \
            "a %s" % type(snapshot).__name__
        raise SnapshotError(
            "not a torch memory snapshot (%s); write one with "
            "torch.cuda.memory._dump_snapshot()" % what)
    if not isinstance(snapshot["device_traces"], list):
        raise SnapshotError("'device_traces' is not a list")
    return snapshot


def choose_device(traces, device):
    if device is not None:
        if device < 0 or device >= len(traces):
            raise SnapshotError("--device %d: the snapshot has devices 0-%d"
                                % (device, len(traces) - 1))
        return device
    recorded = [d for d, t in enumerate(traces) if t]
    if len(recorded) == 1:
        return recorded[0]
    if not recorded:
        raise SnapshotError(
            "no device has a memory history: record one with "
            "torch.cuda.memory._record_memory_history() before the allocations")
    raise SnapshotError("devices %s have memory histories: choose one with --device"
                        % ", ".join(str(d) for d in recorded))


def _int(entry, key, where):
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError("%s: '%s' is %r, not an integer" % (where, key, value))
    return value


def convert_trace(trace):
    rows = []
    for i, entry in enumerate(trace):
        where = "trace entry %d" % i
        if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
            raise SnapshotError("%s: not a TraceEntry (a dict with an 'action')" % where)
        action = entry["action"]
        addr_key = "device_free" if action == "oom" else "addr"
        addr = _int(entry, addr_key, where) if addr_key in entry else 0
        rows.append([action, addr, _int(entry, "size", where), _int(entry, "stream", where)])
    return rows


def convert_settings(settings):
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise SnapshotError("'allocator_settings' is not a dict")
    out = {k: settings[k] for k in SETTINGS_KEYS if k in settings}
    divisions = settings.get("roundup_power2_divisions")
    if isinstance(divisions, dict):  # {"1": d, "2": d, "4": d, ...}: MiB interval starts
        out["roundup_power2_divisions"] = [int(divisions[k])
                                           for k in sorted(divisions, key=lambda k: int(k))]
    elif isinstance(divisions, (list, tuple)):
        out["roundup_power2_divisions"] = [int(d) for d in divisions]
    return out


def convert_segments(segments, device):
    out = []
    for i, seg in enumerate(segments):
        if not isinstance(seg, dict) or "blocks" not in seg:
            raise SnapshotError("segment %d: not a segment (a dict with 'blocks')" % i)
        if seg.get("device", device) != device:
            continue
        pool = seg.get("segment_pool_id")
        if pool is not None and tuple(pool) != (0, 0):
            sys.stderr.write("warning: segment %d belongs to private pool %s (CUDA graphs), "
                             "which the replay does not model\n" % (i, tuple(pool)))
        s = {k: seg[k] for k in SEGMENT_KEYS if k in seg}
        s["blocks"] = [{k: b[k] for k in BLOCK_KEYS if k in b} for b in seg["blocks"]]
        out.append(s)
    out.sort(key=lambda s: s.get("address", 0))
    return out


def convert(snapshot, device=None, source=None, device_memory=None):
    traces = snapshot["device_traces"]
    d = choose_device(traces, device)
    segments = snapshot.get("segments", [])
    if not isinstance(segments, list):
        raise SnapshotError("'segments' is not a list")
    doc = {"format": FORMAT, "version": VERSION}
    if source:
        doc["source"] = source
    doc["device"] = d
    if device_memory:
        doc["device_total_memory"] = device_memory
    doc["allocator_settings"] = convert_settings(snapshot.get("allocator_settings"))
    doc["trace"] = convert_trace(traces[d])
    doc["final_segments"] = convert_segments(segments, d)
    return doc


def dumps(doc):
    """JSON with one trace entry and one segment per line: compact, diffable."""
    lines = ["{"]
    keys = list(doc)
    for n, key in enumerate(keys):
        value = doc[key]
        comma = "," if n + 1 < len(keys) else ""
        if key in ("trace", "final_segments") and value:
            lines.append('  "%s": [' % key)
            for i, item in enumerate(value):
                sep = "," if i + 1 < len(value) else ""
                lines.append("    " + json.dumps(item, separators=(",", ":")) + sep)
            lines.append("  ]" + comma)
        else:
            lines.append('  "%s": %s%s' % (key, json.dumps(value, separators=(",", ":")), comma))
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Convert a torch.cuda.memory._dump_snapshot() pickle to the JSON "
                    "`prism memory replay` reads.")
    parser.add_argument("snapshot", help="the pickle _dump_snapshot() wrote")
    parser.add_argument("--device", type=int, default=None,
                        help="device whose history to keep (default: the only one with a history)")
    parser.add_argument("--device-memory", type=int, metavar="BYTES",
                        help="the GPU's total memory (torch.cuda.get_device_properties(d)"
                             ".total_memory), which sizes expandable segments; the pickle "
                             "does not hold it")
    parser.add_argument("-o", "--output", help="JSON file to write (default: stdout)")
    args = parser.parse_args(argv)
    if args.device_memory is not None and args.device_memory <= 0:
        parser.error("--device-memory must be > 0")
    try:
        snapshot = load_snapshot(args.snapshot)
        doc = convert(snapshot, args.device, os.path.basename(args.snapshot), args.device_memory)
    except (OSError, SnapshotError) as e:
        sys.stderr.write("error: %s: %s\n" % (args.snapshot, e))
        return 1
    text = dumps(doc)
    if args.output:
        write_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
