#!/usr/bin/env python3
"""make_snapshots.py OUT_DIR: writes PyTorch memory snapshots for the replay tests.

Each is what torch.cuda.memory._dump_snapshot() would write after _record_memory_history()
for the allocations below, on one device and stream, with the segment_alloc / segment_free
entries that PyTorch's caching allocator makes for them (harness/sim/cuda-caching-allocator.md:
512-byte rounding, 2 MiB small-pool segments, 20 MiB large-pool segments below 10 MiB and
2 MiB-rounded ones above, best fit, a split only when more than 1 MiB would remain in the
large pool, empty_cache() releasing whole free segments). Worked out by hand in the comments,
not by oomguard's model, so a replay that matches them follows the allocator's rules.

  default.pickle      recorded from the start with default settings (pickle protocol 4)
  default_p2.pickle   the same as LibTorch's TorchScript pickler writes it: protocol 2, the
                      root wrapped in torch.jit._pickle.restore_type_tag
  midrun.pickle       recording started mid-run: a segment and two live blocks before it
  unknown_line.pickle the default run with its user frames at line 2**64 - 1, PyTorch's size_t
                      "unknown line", which Python pickles as a 9-byte LONG1
  two_streams.pickle, private_pool.pickle, expandable.pickle, two_devices.pickle: refused
  code.pickle         a pickle that would run code (refused before anything runs)
"""
import copy
import pickle
import sys
from pathlib import Path

MiB = 1 << 20
KiB = 1 << 10
A, B, C = 0x7F0000000000, 0x7F0001400000, 0x7F0002000000


_FRAMES = {}


def frames(name, line):
    """One list per call site, shared by its entries as PyTorch shares them (the pickle's
    memo then refers back to it)."""
    return _FRAMES.setdefault((name, line), [{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
            {"filename": "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py",
             "line": 125, "name": "forward"},
            {"filename": "/work/train.py", "line": line, "name": name}])


class Recording:
    def __init__(self):
        self.entries = []

    def add(self, action, addr, size, where=("step", 1), stream=0):
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": len(self.entries)}
        e["frames"] = frames(*where) if action == "alloc" else []
        self.entries.append(e)

    def free(self, addr, size):
        self.add("free_requested", addr, size)
        self.add("free_completed", addr, size)


def block(addr, size, requested, state="active_allocated"):
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": []}


def segment(addr, size, kind, blocks, stream=0, pool=(0, 0), device=0):
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": device, "address": addr, "total_size": size, "stream": stream,
            "segment_type": kind, "segment_pool_id": pool, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "blocks": blocks,
            "is_expandable": False}


def snapshot(segments, entries, conf=""):
    return {"segments": segments, "device_traces": [entries],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0,
                                   "expandable_segments": False}}


def default_run():
    """Recorded from the start; reserved after each alloc: 20, 20, 22, 48, 22 MiB."""
    r = Recording()
    r.add("segment_alloc", A, 20 * MiB)          # 4 MiB is large (> 1 MiB), < 10 MiB: 20 MiB
    r.add("alloc", A, 4 * MiB, ("embed", 10))     # reserved 20 MiB
    r.add("alloc", A + 4 * MiB, 3 * MiB, ("attn", 11))  # best fit: the 16 MiB rest, split
    r.add("segment_alloc", B, 2 * MiB)           # 600 KiB is small: a 2 MiB segment
    r.add("alloc", B, 600 * KiB, ("bias", 12))    # reserved 22 MiB
    r.free(A + 4 * MiB, 3 * MiB)                 # merges with the 13 MiB rest: 16 MiB free
    r.add("segment_alloc", C, 26 * MiB)          # 25 MiB > 16 MiB free: round_up(25, 2) = 26
    r.add("alloc", C, 25 * MiB, ("logits", 13))   # 1 MiB would remain: no split; reserved 48
    r.free(C, 25 * MiB)
    r.add("segment_free", C, 26 * MiB)           # empty_cache(): C is the only whole free one
    r.add("alloc", A + 4 * MiB, 8 * MiB, ("mlp", 14))  # best fit in A's 16 MiB; reserved 22
    r.add("snapshot", 0, 0)
    segments = [
        segment(A, 20 * MiB, "large", [block(A, 4 * MiB, 4 * MiB),
                                        block(A + 4 * MiB, 8 * MiB, 8 * MiB),
                                        block(A + 12 * MiB, 8 * MiB, 0, "inactive")]),
        segment(B, 2 * MiB, "small", [block(B, 600 * KiB, 600 * KiB),
                                       block(B + 600 * KiB, 2 * MiB - 600 * KiB, 0, "inactive")]),
    ]
    return snapshot(segments, r.entries)


def midrun():
    """Recording began with segment A (20 MiB) holding a 5 MiB and a 2 MiB block; reserved
    after each alloc: 20, 32 MiB."""
    r = Recording()
    r.free(A + 5 * MiB, 2 * MiB)                 # allocated before recording began
    r.add("alloc", A + 5 * MiB, 6 * MiB, ("attn", 20))  # A's free 15 MiB, split: 9 MiB left
    r.add("segment_alloc", C, 12 * MiB)          # 12 MiB > 9 MiB free; >= 10 MiB: 12 MiB
    r.add("alloc", C, 12 * MiB, ("mlp", 21))      # reserved 32 MiB
    segments = [
        segment(A, 20 * MiB, "large", [block(A, 5 * MiB, 5 * MiB),
                                        block(A + 5 * MiB, 6 * MiB, 6 * MiB),
                                        block(A + 11 * MiB, 9 * MiB, 0, "inactive")]),
        segment(C, 12 * MiB, "large", [block(C, 12 * MiB, 12 * MiB)]),
    ]
    return snapshot(segments, r.entries)


class TypeTagged:
    """Pickles as the TorchScript pickler does: restore_type_tag(value, type)."""

    def __init__(self, value, type_str):
        self.value, self.type_str = value, type_str

    def __reduce__(self):
        return restore_type_tag_global(), (self.value, self.type_str)


def restore_type_tag_global():
    """torch.jit._pickle.restore_type_tag, or where torch cannot be imported (its wheel without
    the NVIDIA libraries: oomguard's CPU set-up) a stand-in registered under the same module
    path, which pickles as the same GLOBAL opcode: the bytes are LibTorch's either way."""
    try:
        from torch.jit._pickle import restore_type_tag
        return restore_type_tag
    except Exception:  # ImportError, or OSError from a missing CUDA library
        import types
        for name in ("torch", "torch.jit", "torch.jit._pickle"):
            sys.modules[name] = types.ModuleType(name)

        def restore_type_tag(value, type_str):
            return value

        restore_type_tag.__module__ = "torch.jit._pickle"
        restore_type_tag.__qualname__ = "restore_type_tag"
        sys.modules["torch.jit._pickle"].restore_type_tag = restore_type_tag
        return restore_type_tag


class Anything:
    """An object: pickles as a GLOBAL and a REDUCE that would call code."""

    def __reduce__(self):
        import os
        return os.getcwd, ()


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def write(name, data, protocol=4):
        (out / name).write_bytes(pickle.dumps(data, protocol=protocol))

    default = default_run()
    write("default.pickle", default)
    write("default_p2.pickle", TypeTagged(default, "Dict[str, Any]"), protocol=2)
    write("midrun.pickle", midrun())
    unknown = copy.deepcopy(default)
    for entry in unknown["device_traces"][0]:
        for frame in entry.get("frames", []):
            if frame["filename"].endswith("train.py"):
                frame["line"] = 2**64 - 1
    write("unknown_line.pickle", unknown)

    two = copy.deepcopy(default)
    two["device_traces"][0][4]["stream"] = 7
    write("two_streams.pickle", two)
    pool = copy.deepcopy(default)
    pool["segments"][0]["segment_pool_id"] = (1, 0)
    write("private_pool.pickle", pool)
    expandable = copy.deepcopy(default)
    expandable["segments"][0]["is_expandable"] = True
    write("expandable.pickle", expandable)
    devices = copy.deepcopy(default)
    devices["device_traces"].append(copy.deepcopy(default["device_traces"][0]))
    write("two_devices.pickle", devices)
    write("code.pickle", {"segments": [], "device_traces": [[Anything()]]})
    data = (out / "default.pickle").read_bytes()
    (out / "truncated.pickle").write_bytes(data[: len(data) // 2])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
