#!/usr/bin/env python3
"""Hand-crafted PyTorch memory snapshots for the replay tests.

No GPU was available when these were made, so each history below is worked
out by hand from the rules of c10/cuda/CUDACachingAllocator.cpp (commit
001074d2): the addresses torch's allocator would hand out given the
addresses cudaMalloc / cuMemAddressReserve returned, and the segment events
it would record. Each snapshot is built in the exact structure
torch.cuda.memory._dump_snapshot() pickles (TraceEntry dicts with frames and
time_us, segment dicts with blocks, allocator_settings), written as a pickle
and converted with scripts/memory_snapshot_to_json.py:

    tests/mem/data/make_snapshots.py            # rewrites tests/mem/data/*.json
    tests/mem/data/make_snapshots.py --pickles DIR   # also keeps the pickles

tests/scripts/memory_snapshot_to_json_test.py checks that the committed JSON
files are what this script and the converter produce.
"""

import argparse
import os
import pickle
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import memory_snapshot_to_json as converter  # noqa: E402

MiB = 1 << 20
SIDE = 94296371933888  # a cudaStream_t of a side stream, as torch records it

FRAMES = [{"name": "forward", "filename": "train.py", "line": 42}]


def settings(conf="", max_split=-1, expandable=False):
    """allocator_settings as recent PyTorch versions record them."""
    return {
        "PYTORCH_CUDA_ALLOC_CONF": conf,
        "max_split_size": max_split,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": expandable,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }


def entry(action, addr, size, stream, t):
    e = {"action": action}
    e["device_free" if action == "oom" else "addr"] = addr
    e.update({"size": size, "stream": stream, "frames": FRAMES, "time_us": 1700000000000000 + t})
    return e


def segment(addr, stream, kind, blocks, expandable=False, device=0):
    """blocks: (size, requested_size, state) in address order."""
    out, a = [], addr
    for size, requested, state in blocks:
        out.append({"address": a, "size": size, "requested_size": requested, "state": state,
                    "frames": FRAMES if state != "inactive" else []})
        a += size
    active = [b for b in out if b["state"] != "inactive"]
    return {
        "device": device,
        "address": addr,
        "total_size": a - addr,
        "allocated_size": sum(b["size"] for b in out if b["state"] == "active_allocated"),
        "active_size": sum(b["size"] for b in active),
        "requested_size": sum(b["requested_size"] for b in active),
        "stream": stream,
        "segment_type": kind,
        "segment_pool_id": (0, 0),
        "is_expandable": expandable,
        "frames": FRAMES,
        "blocks": out,
    }


def snapshot(trace, segments, alloc_settings):
    return {
        "segments": segments,
        "device_traces": [[entry(*e, t=i * 10) for i, e in enumerate(trace)]],
        "allocator_settings": alloc_settings,
    }


# --- basic: default settings -------------------------------------------------
# Two small requests share a 2 MiB segment; 5 MiB takes a 20 MiB segment and
# is split off it; 30 MiB + 1000 B rounds to 31458304 B in a 32 MiB segment
# (the 2096128 B remainder is over 1 MiB: split); a freed 1 KiB block is
# reused by 800 B exactly; 2 MiB is split off the 20 MiB segment's 15 MiB
# remainder (best fit: the 2096128 B block is too small); empty_cache()
# releases the one unsplit cached segment.
SMALL, LARGE, BIG = 0x7F0000000000, 0x7F0000200000, 0x7F0001600000


def basic(alloc_2mib_at=LARGE + 5 * MiB):
    trace = [
        ("segment_alloc", SMALL, 2 * MiB, 0),
        ("alloc", SMALL, 1000, 0),
        ("alloc", SMALL + 1024, 3000, 0),
        ("segment_alloc", LARGE, 20 * MiB, 0),
        ("alloc", LARGE, 5 * MiB, 0),
        ("segment_alloc", BIG, 32 * MiB, 0),
        ("alloc", BIG, 30 * MiB + 1000, 0),
        ("free_requested", SMALL, 1000, 0),
        ("free_completed", SMALL, 1000, 0),
        ("alloc", SMALL, 800, 0),
        ("alloc", alloc_2mib_at, 2 * MiB, 0),
        ("free_requested", BIG, 30 * MiB + 1000, 0),
        ("free_completed", BIG, 30 * MiB + 1000, 0),
        ("snapshot", 0, 1024 + 3072 + 5 * MiB + 2 * MiB, 0),  # torch.cuda.memory_snapshot()
        ("free_requested", LARGE, 5 * MiB, 0),
        ("free_completed", LARGE, 5 * MiB, 0),
        ("segment_free", BIG, 32 * MiB, 0),  # torch.cuda.empty_cache()
        ("free_requested", SMALL + 1024, 3000, 0),
        ("free_completed", SMALL + 1024, 3000, 0),
    ]
    before = alloc_2mib_at - LARGE
    segments = [
        segment(SMALL, 0, "small", [(1024, 800, "active_allocated"),
                                    (2 * MiB - 1024, 3000, "inactive")]),
        segment(LARGE, 0, "large", [(before, 5 * MiB, "inactive"),
                                    (2 * MiB, 2 * MiB, "active_allocated"),
                                    (18 * MiB - before, 0, "inactive")]),
    ]
    return snapshot(trace, segments, settings())


# --- diverging: basic, but the 2 MiB block at an address the model does not
# choose (best fit takes the start of the 15 MiB free block, not 4 MiB in).
def diverging():
    return basic(alloc_2mib_at=LARGE + 9 * MiB)


# --- record_stream: a block used on a side stream waits for it -------------
A, SM = 0x7F2000000000, 0x7F2001400000


def record_stream():
    trace = [
        ("segment_alloc", A, 20 * MiB, 0),
        ("alloc", A, 4 * MiB, 0),
        ("free_requested", A, 4 * MiB, 0),       # x.record_stream(side); del x
        ("alloc", A + 4 * MiB, 4 * MiB, 0),      # A still waits for the side stream
        ("free_completed", A, 4 * MiB, 0),       # process_events() of the next malloc
        ("alloc", A, 4 * MiB, 0),                # best fit: A exactly
        ("segment_alloc", SM, 2 * MiB, SIDE),
        ("alloc", SM, 512, SIDE),
        ("free_requested", SM, 512, SIDE),
        ("free_completed", SM, 512, SIDE),
        ("free_requested", A + 4 * MiB, 4 * MiB, 0),
        ("free_completed", A + 4 * MiB, 4 * MiB, 0),
        ("free_requested", A, 4 * MiB, 0),       # recorded on the side stream again
        ("alloc", SM, 1024, SIDE),
        ("free_completed", A, 4 * MiB, 0),       # empty_cache(): synchronize...
        ("segment_free", A, 20 * MiB, 0),        # ...then release the whole segment
        ("free_requested", SM, 1024, SIDE),
        ("free_completed", SM, 1024, SIDE),
    ]
    segments = [segment(SM, SIDE, "small", [(2 * MiB, 1024, "inactive")])]
    return snapshot(trace, segments, settings())


# --- expandable: expandable_segments:True ----------------------------------
# A 2 MiB page for the small pool, 20 MiB pages for the large one; 18 MiB
# after 5 MiB maps a second page and is carved from the merged free space;
# empty_cache() unmaps both large pages (the segment goes, without an event).
B, L = 0x7F4000000000, 0x7F6000000000


def expandable():
    trace = [
        ("segment_map", B, 2 * MiB, 0),
        ("alloc", B, 1000, 0),
        ("segment_map", L, 20 * MiB, 0),
        ("alloc", L, 5 * MiB, 0),
        ("segment_map", L + 20 * MiB, 20 * MiB, 0),
        ("alloc", L + 5 * MiB, 18 * MiB, 0),
        ("free_requested", L, 5 * MiB, 0),
        ("free_completed", L, 5 * MiB, 0),
        ("free_requested", L + 5 * MiB, 18 * MiB, 0),
        ("free_completed", L + 5 * MiB, 18 * MiB, 0),
        ("segment_unmap", L, 40 * MiB, 0),
    ]
    segments = [segment(B, 0, "small", [(1024, 1000, "active_allocated"),
                                        (2 * MiB - 1024, 0, "inactive")], expandable=True)]
    return snapshot(trace, segments, settings("expandable_segments:True", expandable=True))


# --- max_split: max_split_size_mb:64 ---------------------------------------
# A cached 100 MiB block is oversize: 90 MiB takes it whole (within 20 MiB),
# 70 MiB and 10 MiB do not; when cudaMalloc(40 MiB) fails it is released and
# the retry gets its address back; 200 MiB then runs out of memory.
S1, S2, S3 = 0x7F8000000000, 0x7F8006400000, 0x7F800AA00000


def max_split():
    trace = [
        ("segment_alloc", S1, 100 * MiB, 0),
        ("alloc", S1, 100 * MiB, 0),
        ("free_requested", S1, 100 * MiB, 0),
        ("free_completed", S1, 100 * MiB, 0),
        ("alloc", S1, 90 * MiB, 0),
        ("free_requested", S1, 90 * MiB, 0),
        ("free_completed", S1, 90 * MiB, 0),
        ("segment_alloc", S2, 70 * MiB, 0),
        ("alloc", S2, 70 * MiB, 0),
        ("segment_alloc", S3, 10 * MiB, 0),
        ("alloc", S3, 10 * MiB, 0),
        ("segment_free", S1, 100 * MiB, 0),
        ("segment_alloc", S1, 40 * MiB, 0),
        ("alloc", S1, 40 * MiB, 0),
        ("oom", 118 * MiB, 200 * MiB, 0),
        ("free_requested", S2, 70 * MiB, 0),
        ("free_completed", S2, 70 * MiB, 0),
        ("free_requested", S3, 10 * MiB, 0),
        ("free_completed", S3, 10 * MiB, 0),
        ("free_requested", S1, 40 * MiB, 0),
        ("free_completed", S1, 40 * MiB, 0),
    ]
    segments = [
        segment(S1, 0, "large", [(40 * MiB, 40 * MiB, "inactive")]),
        segment(S2, 0, "large", [(70 * MiB, 70 * MiB, "inactive")]),
        segment(S3, 0, "large", [(10 * MiB, 10 * MiB, "inactive")]),
    ]
    return snapshot(trace, segments, settings("max_split_size_mb:64", max_split=64 * MiB))


SNAPSHOTS = {
    "basic": basic,
    "diverging": diverging,
    "record_stream": record_stream,
    "expandable": expandable,
    "max_split": max_split,
}


def write_pickle(name, directory):
    path = os.path.join(directory, name + ".pickle")
    with open(path, "wb") as f:
        pickle.dump(SNAPSHOTS[name](), f)
    return path


def json_text(name, directory):
    """What the converter makes of the snapshot's pickle."""
    path = write_pickle(name, directory)
    doc = converter.convert(converter.load_snapshot(path), None, os.path.basename(path))
    return converter.dumps(doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pickles", help="keep the pickles in this directory")
    parser.add_argument("--out", default=HERE, help="where to write the JSON files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.pickles or tmp
        for name in SNAPSHOTS:
            with open(os.path.join(args.out, name + ".json"), "w") as f:
                f.write(json_text(name, directory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
