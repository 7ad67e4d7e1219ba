"""same_prediction.py CPU_REPORT META_REPORT: the Meta device's prediction is the CPU path's.

Both reports are one run's, on the CPU (--allocator-model cuda) and on the Meta device, with
the same card and config: the same outcome, and per phase the predicted allocated and reserved
peaks within gpu-sanity's tolerances (1% + 1 MiB) and the same retries. Prints each phase's
figures; exits 1 naming the first that differs.
"""
import json
import sys


def main(cpu_path, meta_path):
    cpu, meta = (json.load(open(p)) for p in (cpu_path, meta_path))
    if cpu["outcome"] != meta["outcome"]:
        sys.exit(f"FAIL: outcome {cpu['outcome']} on the CPU, {meta['outcome']} on Meta")
    if [p["name"] for p in cpu["phases"]] != [p["name"] for p in meta["phases"]]:
        sys.exit("FAIL: the two runs have other phases")
    for a, b in zip(cpu["phases"], meta["phases"]):
        for key in ("predicted_peak_allocated_bytes", "peak_reserved_bytes"):
            if abs(a[key] - b[key]) > 0.01 * a[key] + 2**20:
                sys.exit(f"FAIL: {a['name']}: {key} {a[key]} B on the CPU, {b[key]} B on Meta")
        if a["num_alloc_retries"] != b["num_alloc_retries"]:
            sys.exit(f"FAIL: {a['name']}: {a['num_alloc_retries']} retries on the CPU, "
                     f"{b['num_alloc_retries']} on Meta")
        print(f"ok: {a['name']}: predicted allocated {b['predicted_peak_allocated_bytes']} B on "
              f"Meta, {a['predicted_peak_allocated_bytes']} B on the CPU; reserved "
              f"{b['peak_reserved_bytes']} B, {a['peak_reserved_bytes']} B")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
