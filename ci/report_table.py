#!/usr/bin/env python3
"""Markdown tables from oomguard's JSON, for $GITHUB_STEP_SUMMARY and ci/gpu-sanity.sh.

  report_table.py run REPORT.json [REPORT.json ...]   per-phase peaks, one block per report
  report_table.py repeat SUMMARY.json                 failure rate and per-phase peak spread
  report_table.py compare CUDA.json MODEL.json        real reserved peaks against the allocator
                                                      model's prediction (run --allocator-model cuda)
"""
import json
import sys


def mib(n):
    return "-" if n is None else f"{n / 2**20:.2f} MiB"


def run_tables(paths):
    rows = ["| run | phase | status | peak allocated | peak reserved | retries | budget |",
            "|---|---|---|---|---|---|---|"]
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        d = r.get("device_info", {})
        where = d.get("name") or r["device"]
        if d.get("emulated_card"):
            where += f" as {d['emulated_card']}"
        if d.get("allocator_model"):
            where += " (allocator model)"
        for p in r["phases"]:
            rows.append(f"| {where} | {p['name']} | {p['status']} | {mib(p['peak_allocated_bytes'])} "
                        f"| {mib(p.get('peak_reserved_bytes'))} | {p.get('num_alloc_retries', 0)} "
                        f"| {mib(p['budget_bytes'])} |")
        rows.append(f"| {where} | **outcome** | **{r['outcome']}** | | | | |")
    return "\n".join(rows)


def repeat_table(path):
    with open(path) as f:
        s = json.load(f)["statistics"]
    lo, hi = s["wilson_95"]
    head = f"**{s['failures']}/{s['runs']} runs failed** (95% interval {100*lo:.1f}–{100*hi:.1f}%)"
    if s.get("upper_bound_95") is not None:
        head += f"; failure rate below {100*s['upper_bound_95']:.1f}% at 95%"
    if s.get("reproduce") and s["failures"]:
        head += f"\n\nworst seed {s['worst_seed']}: `{s['reproduce']}`"
    rows = ["| phase | runs | min peak | median peak | max peak |", "|---|---|---|---|---|"]
    for p in s["peaks"]:
        rows.append(f"| {p['phase']} | {p['runs']} | {mib(p['min_bytes'])} "
                    f"| {mib(p['median_bytes'])} | {mib(p['max_bytes'])} |")
    return head + "\n\n" + "\n".join(rows)


def compare_table(real_path, model_path):
    with open(real_path) as f:
        real = {p["name"]: p for p in json.load(f)["phases"]}
    with open(model_path) as f:
        model = json.load(f)["phases"]
    rows = ["| phase | real reserved | predicted reserved | predicted - real |", "|---|---|---|---|"]
    for p in model:
        r = real.get(p["name"], {}).get("peak_reserved_bytes")
        m = p.get("peak_reserved_bytes")
        diff = "-" if r is None or m is None else f"{(m - r) / 2**20:+.2f} MiB ({100 * (m - r) / r:+.1f}%)"
        rows.append(f"| {p['name']} | {mib(r)} | {mib(m)} | {diff} |")
    return "\n".join(rows)


def main(argv):
    if len(argv) < 3 or argv[1] not in ("run", "repeat", "compare") or (
            argv[1] == "compare" and len(argv) != 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[1] == "run":
        print(run_tables(argv[2:]))
    elif argv[1] == "repeat":
        print(repeat_table(argv[2]))
    else:
        print(compare_table(argv[2], argv[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
