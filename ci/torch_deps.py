"""Prints, one per line, the requirements of the installed torch wheel that one half of it
needs (run by the venv's python after `pip install --no-deps torch`; reads the wheel's
metadata, imports nothing of torch):
  cpu   the NVIDIA libraries libtorch_cpu loads: the CUDA runtime (libcudart) and CUPTI
        (libcupti, for its profiler); nothing else of the wheel's CUDA is loaded by a CPU
        program, and oomguard's build and default tests never import torch's Python package
  cuda  every requirement but triton (Python kernels, never loaded by LibTorch): the whole
        wheel, which torch's Python needs too (the slow checks import it, OOMGUARD_SLOW=1)
"""
import importlib.metadata
import re
import sys

from pip._vendor.packaging.requirements import Requirement

CPU_EXTRAS = {"cudart", "cupti"}
CPU_NAMES = re.compile(r"^nvidia-cuda-(runtime|cupti)(-cu\d+)?$")


def wanted(req, half):
    name = req.name.lower()
    if half == "cuda":
        return None if name == "triton" else str(req)
    if name == "cuda-toolkit":
        extras = sorted(CPU_EXTRAS & set(req.extras))
        return f"cuda-toolkit[{','.join(extras)}]{req.specifier}" if extras else None
    return str(req) if CPU_NAMES.match(name) else None


def main(half):
    if half not in ("cpu", "cuda"):
        sys.exit(f"torch_deps.py: give cpu or cuda, not {half!r}")
    for line in importlib.metadata.requires("torch") or []:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        out = wanted(req, half)
        if out:
            print(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
