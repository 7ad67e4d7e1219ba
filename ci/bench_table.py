"""Medians and target ratios from oomguard_bench's Google Benchmark JSON, as Markdown.

bench_table.py TIMES_JSON MEMORY_JSON: times and counters are the medians over the
repetitions of TIMES_JSON; peak bytes (max_bytes_used) come from the single-repetition
MEMORY_JSON (see ci/run-bench.sh for why)."""
import json
import statistics
import sys
from collections import defaultdict


def medians(doc, memory):
    memory_fields = {b["run_name"]: b for b in memory["benchmarks"]
                     if b.get("run_type") == "iteration"}
    runs = defaultdict(list)
    for b in doc["benchmarks"]:
        if b.get("run_type") == "iteration":
            runs[b["run_name"]].append(b)
    out = {}
    for name, reps in runs.items():
        row = {"time_ms": statistics.median(r["real_time"] for r in reps) *
               {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[reps[0]["time_unit"]],
               "repetitions": len(reps)}
        for key in ("tokens_per_second", "gflops", "bytes_per_second", "weight_bytes",
                    "events_per_second", "max_rss_bytes"):
            values = [r[key] for r in reps if key in r]
            if values:
                row[key] = statistics.median(values)
        for key in ("max_bytes_used", "total_allocated_bytes"):
            if key in memory_fields.get(name, {}):
                row[key] = memory_fields[name][key]
        out[name] = row
    return out


def ratio(rows, a, b, key, target, better, key_b=None):
    key_b = key_b or key
    if a not in rows or b not in rows or key not in rows[a] or key_b not in rows[b]:
        return None
    return judged(rows[a][key] / rows[b][key_b], target, better)


def absolute(rows, name, key, scale, limit):
    """rows[name][key] times scale, judged against an upper limit."""
    if name not in rows or key not in rows[name]:
        return None
    return judged(rows[name][key] * scale, limit, "lower")


def meta_run(model, meta):
    return f"BM_MetaRun/model:{model}/meta:{meta}/iterations:1/real_time"


def judged(value, target, better):
    return value, (value <= target if better == "lower" else value >= target)


def decode_floor_ratio(rows):
    """BM_Decode's time per token over the time to read every weight once at the measured
    copy bandwidth."""
    decode, copy = rows.get("BM_Decode"), rows.get("BM_MemoryBandwidth")
    if not decode or not copy or "weight_bytes" not in decode or "bytes_per_second" not in copy:
        return None
    floor_ms = decode["weight_bytes"] / copy["bytes_per_second"] * 1e3
    return judged(decode["time_ms"] / floor_ms, 3.0, "lower")


def replay_rate(rows):
    r = rows.get("BM_Replay/expandable:0")
    return judged(r["events_per_second"] / 1e6, 5.0, "higher") if r and "events_per_second" in r else None


def main(times_path, memory_path):
    doc = json.load(open(times_path))
    rows = medians(doc, json.load(open(memory_path)))
    ctx = doc["context"]
    print(f"Machine: {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
          f"{ctx.get('date')}; medians of the repetitions.\n")
    print("| benchmark | repetitions | median time (ms) | tokens/s | GFLOP/s, GB/s or events/s "
          "| peak above start | allocated per iteration |")
    print("|---|---|---|---|---|---|---|")
    for name, r in sorted(rows.items()):
        tps = f"{r['tokens_per_second']:.0f}" if "tokens_per_second" in r else ""
        rate = (f"{r['gflops']:.1f} GFLOP/s" if "gflops" in r else
                f"{r['bytes_per_second'] / 1e9:.1f} GB/s" if "bytes_per_second" in r else
                f"{r['events_per_second'] / 1e6:.1f} M events/s" if "events_per_second" in r
                else "")
        mem = f"{r['max_bytes_used'] / 2**20:.2f} MiB" if "max_bytes_used" in r else ""
        total = (f"{r['total_allocated_bytes'] / 2**20:.1f} MiB"
                 if "total_allocated_bytes" in r else "")
        print(f"| {name} | {r['repetitions']} | {r['time_ms']:.3f} | {tps} | {rate} | {mem} "
              f"| {total} |")
    ckpt, plain = "BM_TrainStepCheckpoint/checkpoint:1", "BM_TrainStepCheckpoint/checkpoint:0"
    static, grow, none = ("BM_DecodeCache/cache:0", "BM_DecodeCache/cache:1",
                          "BM_DecodeCache/cache:2")
    gemm = "BM_GemmCeiling/M:1024/K:1024/N:1024"
    targets = [
        ("train step GFLOP/s / GEMM 1024^3 GFLOP/s", ratio(rows, "BM_TrainStep", gemm, "gflops", 0.80, "higher"), ">= 0.80"),
        ("train step GFLOP/s / GEMM at the fc layer's shape", ratio(rows, "BM_TrainStep", "BM_GemmCeiling/M:2048/K:384/N:1536", "gflops", 0.80, "higher"), "(reference)"),
        ("tracked / untracked train step time", ratio(rows, "BM_TrainStep", "BM_TrainStepUntracked", "time_ms", 1.02, "lower"), "<= 1.02"),
        ("predicted (t4 model) / tracked train step time", ratio(rows, "BM_TrainStepPredicted", "BM_TrainStep", "time_ms", 1.10, "lower"), "<= 1.10"),
        ("untagged named by operator / by tag only, train step time", ratio(rows, "BM_TrainStepNamed", "BM_TrainStepTagged", "time_ms", 1.05, "lower"), "<= 1.05"),
        ("decode time per token / weight-read floor", decode_floor_ratio(rows), "<= 3"),
        ("collate tokens/s / train step tokens/s", ratio(rows, "BM_Collate", "BM_TrainStep", "tokens_per_second", 100.0, "higher"), ">= 100"),
        ("checkpointed / plain train step time", ratio(rows, ckpt, plain, "time_ms", 1.35, "lower"), "<= 1.35"),
        ("checkpointed / plain train step peak", ratio(rows, ckpt, plain, "max_bytes_used", 0.45, "lower"), "<= 0.45"),
        ("static / none decode tokens/s", ratio(rows, static, none, "tokens_per_second", 8.0, "higher"), ">= 8"),
        ("static / grow decode tokens/s", ratio(rows, static, grow, "tokens_per_second", 1.0, "higher"), ">= 1"),
        ("static / grow decode peak", ratio(rows, static, grow, "max_bytes_used", 1.0, "lower"), "< 1"),
        ("replay events/s (millions), default settings", replay_rate(rows), ">= 5"),
        ("--worst-case / plain run time, guarded (T4 model)", ratio(rows, "BM_Run/worst_case:1/guarded:1/iterations:1/real_time", "BM_Run/worst_case:0/guarded:1/iterations:1/real_time", "time_ms", 3.0, "lower"), "<= 3"),
        ("--worst-case / plain run time, unguarded (T4 model)", ratio(rows, "BM_Run/worst_case:1/guarded:0/iterations:1/real_time", "BM_Run/worst_case:0/guarded:0/iterations:1/real_time", "time_ms", 3.0, "lower"), "<= 3"),
        ("GPT-2-small on the Meta device, seconds (T4)", absolute(rows, meta_run(0, 1), "time_ms", 1e-3, 5.0), "<= 5"),
        ("GPT-2-small on the Meta device, resident GiB", absolute(rows, meta_run(0, 1), "max_rss_bytes", 2**-30, 1.0), "<= 1"),
        ("GPT-2-small, Meta / CPU path time", ratio(rows, meta_run(0, 1), meta_run(0, 0), "time_ms", 1.0, "lower"), "(reference)"),
        ("GPT-2-small, Meta / CPU path resident set", ratio(rows, meta_run(0, 1), meta_run(0, 0), "max_rss_bytes", 1.0, "lower"), "(reference)"),
        ("~12 GB T4 model on the Meta device, seconds", absolute(rows, meta_run(1, 1), "time_ms", 1e-3, 10.0), "<= 10"),
        ("~12 GB T4 model on the Meta device, resident GiB", absolute(rows, meta_run(1, 1), "max_rss_bytes", 2**-30, 1.0), "<= 1"),
        ("1.31B model for an A100-80 on the Meta device, seconds", absolute(rows, meta_run(2, 1), "time_ms", 1e-3, 30.0), "<= 30"),
        ("static / grow bytes allocated per decode", ratio(rows, static, grow, "total_allocated_bytes", 1.0, "lower"), "(churn)"),
    ]
    print("\n| ratio | measured | target | met |")
    print("|---|---|---|---|")
    for label, result, target in targets:
        if result is not None:
            met = "" if target.startswith("(") else ("yes" if result[1] else "no")
            print(f"| {label} | {result[0]:.3f} | {target} | {met} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
