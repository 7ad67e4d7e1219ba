#!/usr/bin/env python3
"""Markdown tables from oomguard's JSON, for $GITHUB_STEP_SUMMARY and ci/gpu-sanity.sh.

  report_table.py run REPORT.json [REPORT.json ...]   per-phase peaks, one block per report
  report_table.py repeat SUMMARY.json                 failure rate and per-phase peak spread
  report_table.py compare CUDA.json MODEL.json [--tolerance PCT] [--slack SIZE] [--allowance SIZE]
      a CUDA run's measured peaks (allocated, reserved, retries) against the CPU run through the
      allocator model (run --allocator-model cuda): its predicted allocated peak (the model's
      rounded blocks and cuBLAS workspaces) where the report has one, else the CPU bytes; its
      predicted reserved peak. With --tolerance, a figure passes when
      CUDA - model lies within [-(PCT% of model + SLACK), ALLOWANCE + PCT% of model + SLACK]
      (ALLOWANCE: what the CUDA side holds and the model leaves out, e.g. cuBLAS workspaces,
      present at a phase's peak or not), retries agree when both are zero or both non-zero,
      and both runs must end alike (an OOM in the same phase); exit 1 when one does not. SIZE: bytes, or with KiB, MiB, GiB.
"""
import argparse
import json
import re
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


SIZE = re.compile(r"^(\d+(?:\.\d+)?)(B|KiB|MiB|GiB)?$")
UNITS = {None: 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def size(text):
    m = SIZE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4096, 64MiB, 1.5GiB)")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def signed_mib(n):
    return f"{n / 2**20:+.2f} MiB"


class Tolerance:
    """The band CUDA - model must lie in, for one figure of one phase."""

    def __init__(self, pct, slack, allowance):
        self.pct, self.slack, self.allowance = pct, slack, allowance

    def band(self, model):
        spread = self.pct / 100 * model + self.slack
        return -spread, self.allowance + spread

    def __str__(self):
        return (f"CUDA - model within -({self.pct:g}% of model + {mib(self.slack)}) .. "
                f"+({mib(self.allowance)} allowance + {self.pct:g}% of model + {mib(self.slack)}); "
                f"retries: both zero or both non-zero; outcomes equal")


def compare_table(real_path, model_path, tolerance=None):
    """Returns the Markdown table and the number of figures beyond tolerance (0 without one)."""
    with open(real_path) as f:
        real_report = json.load(f)
    with open(model_path) as f:
        model_report = json.load(f)
    real = {p["name"]: p for p in real_report["phases"]}
    rows = ["| phase | figure | CUDA | model | CUDA - model | allowed | verdict |",
            "|---|---|---|---|---|---|---|"]
    bad = 0

    def verdict(ok):
        nonlocal bad
        if tolerance is None:
            return "-"
        bad += 0 if ok else 1
        return "ok" if ok else "**beyond**"

    for p in model_report["phases"]:
        r = real.get(p["name"])
        predicted = p.get("predicted_peak_allocated_bytes") is not None
        for key, model_key, figure in (
                ("peak_allocated_bytes",
                 "predicted_peak_allocated_bytes" if predicted else "peak_allocated_bytes",
                 "peak allocated" if predicted else "peak allocated (model: CPU bytes)"),
                ("peak_reserved_bytes", "peak_reserved_bytes", "peak reserved")):
            c = None if r is None else r.get(key)
            m = p.get(model_key)
            if c is None or m is None:
                rows.append(f"| {p['name']} | {figure} | {mib(c)} | {mib(m)} | - | - "
                            f"| {verdict(False)} (not measured) |")
                continue
            diff = c - m
            share = f" ({100 * diff / m:+.1f}%)" if m else ""
            allowed = "-"
            ok = True
            if tolerance is not None:
                lo, hi = tolerance.band(m)
                allowed = f"{signed_mib(lo)} .. {signed_mib(hi)}"
                ok = lo <= diff <= hi
            rows.append(f"| {p['name']} | {figure} | {mib(c)} | {mib(m)} | {signed_mib(diff)}{share} "
                        f"| {allowed} | {verdict(ok)} |")
        c = None if r is None else r.get("num_alloc_retries")
        m = p.get("num_alloc_retries")
        ok = c is not None and m is not None and (c > 0) == (m > 0)
        rows.append(f"| {p['name']} | retries | {'-' if c is None else c} | {'-' if m is None else m} "
                    f"| | both zero or both not | {verdict(ok)} |")
    for name in real:
        if name not in {p["name"] for p in model_report["phases"]}:
            rows.append(f"| {name} | phase | measured | missing | | | {verdict(False)} |")
    ok = real_report["outcome"] == model_report["outcome"]
    rows.append(f"| **outcome** | | {real_report['outcome']} | {model_report['outcome']} | | equal "
                f"| {verdict(ok)} |")
    real_oom, model_oom = real_report.get("oom"), model_report.get("oom")
    if real_oom or model_oom:
        def where(oom):
            return "-" if not oom else f"{oom['phase']}, asked {mib(oom.get('requested_bytes'))}"
        ok = bool(real_oom and model_oom and real_oom["phase"] == model_oom["phase"])
        rows.append(f"| **out of memory** | phase | {where(real_oom)} | {where(model_oom)} | "
                    f"| same phase | {verdict(ok)} |")
    text = "\n".join(rows)
    if tolerance is not None:
        text = (f"Tolerance: {tolerance}\n\n{text}\n\n"
                + ("**within tolerance**" if bad == 0 else f"**{bad} figure(s) beyond tolerance**"))
    return text, bad


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("reports", nargs="+")
    sub.add_parser("repeat").add_argument("summary")
    compare = sub.add_parser("compare")
    compare.add_argument("cuda")
    compare.add_argument("model")
    compare.add_argument("--tolerance", type=float, metavar="PCT",
                         help="check: relative tolerance in percent of the model's figure")
    compare.add_argument("--slack", type=size, default=0, metavar="SIZE",
                         help="check: absolute tolerance either way (default 0)")
    compare.add_argument("--allowance", type=size, default=0, metavar="SIZE",
                         help="check: what CUDA may hold above the model (default 0)")
    args = parser.parse_args(argv[1:])
    if args.command == "run":
        print(run_tables(args.reports))
    elif args.command == "repeat":
        print(repeat_table(args.summary))
    else:
        if args.tolerance is not None and args.tolerance < 0:
            parser.error("--tolerance must be 0 or more")
        tolerance = None if args.tolerance is None else Tolerance(args.tolerance, args.slack,
                                                                  args.allowance)
        text, bad = compare_table(args.cuda, args.model, tolerance)
        print(text)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
