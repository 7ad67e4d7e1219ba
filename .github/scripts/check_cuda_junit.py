#!/usr/bin/env python3
"""check_cuda_junit.py JUNIT.xml BUILD_DIR: the T4 job's ctest JUnit file proves CUDA ran.

Fails (exit 1) when no CUDA test was executed, or when any test was skipped: on a GPU runner a
skip means the device or the CUDA meter was missing, and a green job must not hide that.
CUDA tests are those ctest lists with label cuda in BUILD_DIR (`ctest --show-only=json-v1`), those
whose JUnit properties carry that label (newer CMake writes cmake_labels), and the `*Cuda`
names (oomguard's convention for GPU tests).
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def cuda_tests_listed(build_dir):
    try:
        listing = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"],
                                 check=True, capture_output=True, text=True).stdout
        tests = json.loads(listing).get("tests", [])
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"check_cuda_junit: ctest listing failed ({e}); using labels and names only",
              file=sys.stderr)
        return set()
    return {t["name"] for t in tests
            if any(p.get("name") == "LABELS" and "cuda" in p.get("value", [])
                   for p in t.get("properties", []))}


def labels(case):
    for prop in case.iter("property"):
        if prop.get("name") == "cmake_labels":
            return set(prop.get("value", "").split(";"))
    return set()


def main(junit, build_dir):
    try:
        cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        print(f"::error::no readable ctest JUnit file {junit}: {e}")
        return 1
    listed = cuda_tests_listed(build_dir)
    skipped, ran, cuda_skipped = [], [], []
    for case in cases:
        name = case.get("name", "")
        is_cuda = name in listed or "cuda" in labels(case) or name.endswith("Cuda")
        if case.get("status") == "notrun" or case.find("skipped") is not None:
            skipped.append(name)
            if is_cuda:
                cuda_skipped.append(name)
        elif is_cuda and case.get("status") in ("run", "fail"):
            ran.append(name)
    print(f"{len(cases)} tests in {junit}; CUDA tests executed: {len(ran)}, "
          f"skipped: {len(cuda_skipped)}; all tests skipped: {len(skipped)}")
    for name in ran:
        print(f"  ran: {name}")
    ok = True
    if skipped:
        print(f"::error::{len(skipped)} test(s) skipped on the GPU runner (device or CUDA meter "
              f"missing?): {', '.join(skipped[:10])}")
        ok = False
    if not ran:
        print("::error::no CUDA test was executed: ctest -L 'memory|cuda' tested nothing on the GPU")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip())
    sys.exit(main(sys.argv[1], sys.argv[2]))
