#!/usr/bin/env bash
# test_environment_check.sh CTEST BUILD_DIR: every test of the suite, the discovered gtest
# tests included, carries the suite's environment itself (cmake/testing.cmake), so plain
# `ctest` and `ctest -j2` run it as the preset does; its device (OOMGUARD_DEVICE) included, so
# `oomguard run` and the GoogleTest layer measure what the suite was configured for.
set -euo pipefail
"$1" --test-dir "$2" --show-only=json-v1 | python3 -c '
import json, sys
tests = json.load(sys.stdin)["tests"]
def env(t):
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            return dict(e.split("=", 1) for e in p["value"])
    return {}
tests = [t for t in tests if not t["name"].endswith("_NOT_BUILT")]  # targets a preset does not build
bad = [t["name"] for t in tests
       if env(t).get("OMP_WAIT_POLICY") != "PASSIVE" or not env(t).get("OOMGUARD_SEED_COUNTER_DIR")
       or env(t).get("OOMGUARD_DEVICE") not in ("cpu", "cuda", "auto")]
if bad or len(tests) < 50:
    sys.exit(f"FAIL: {len(bad)} of {len(tests)} tests lack the environment: {bad[:10]}")
device = env(tests[0])["OOMGUARD_DEVICE"]
print(f"ok: all {len(tests)} tests carry OMP_WAIT_POLICY=PASSIVE, the seed-counter directory "
      f"and the suite device ({device})")
'
