#!/usr/bin/env python3
"""autocast_reference.py [CASE ...]: PyTorch's own figures for tests/amp/autocast_models_test.cpp.

Each case is a model and a precision ("gpt/fp16", "convnet/fp32", ...): the model, the same as
the C++ test's, made on fake CUDA tensors (FakeTensorMode, no GPU needed), its forward and loss
run with CUDA autocast switched on directly (torch.set_autocast_enabled("cuda", True); the
context manager torch.autocast("cuda") turns itself off without a driver and the run would be
fp32), counted by torch.distributed._tools.mem_tracker.MemTracker. Prints one JSON object:
{case: {"peak_allocated_bytes": N, "output_dtype": "Half", "loss_dtype": "Float"}}."""
import json
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

# The shapes of the C++ test (kGpt, kConv in autocast_models_test.cpp).
D, H, L, V, B, T = 256, 4, 2, 2048, 4, 128
CONV_B, CONV_C, CONV_HW, CLASSES = 8, 3, 64, 10


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4).unbind(0)
        w = torch.matmul(q, k.transpose(-2, -1)) * (D // H) ** -0.5
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        w = w.masked_fill(mask, float("-inf"))
        a = torch.matmul(F.softmax(w, dim=-1), v)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.lnf, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(CONV_C, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.c2, self.b2 = nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64)
        self.fc = nn.Linear(64 * (CONV_HW // 4) ** 2, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.max_pool2d(F.relu(self.b2(self.c2(x))), 2)
        return self.fc(x.flatten(1))


def run(case):
    model_name, precision = case.split("/")
    with FakeTensorMode():
        with torch.device("cuda"):
            if model_name == "gpt":
                model = GPT()
                inputs = torch.randint(0, V, (B, T))
                targets = torch.randint(0, V, (B, T))
            else:
                model = ConvNet()
                inputs = torch.randn(CONV_B, CONV_C, CONV_HW, CONV_HW)
                targets = torch.randint(0, CLASSES, (CONV_B,))
        tracker = MemTracker()
        tracker.track_external(model, inputs, targets)
        if precision != "fp32":
            dtype = torch.float16 if precision == "fp16" else torch.bfloat16
            torch.set_autocast_dtype("cuda", dtype)
            torch.set_autocast_enabled("cuda", True)
        with tracker:
            out = model(inputs)
            loss = F.cross_entropy(out.view(-1, out.shape[-1]), targets.view(-1))
        torch.set_autocast_enabled("cuda", False)
        torch.clear_autocast_cache()
        peak = tracker.get_tracker_snapshot("peak")
        total = sum(v["Total"] for v in peak.values())
    names = {torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16"}
    return {"peak_allocated_bytes": total, "output_dtype": names[out.dtype],
            "loss_dtype": names[loss.dtype]}


def main():
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    cases = sys.argv[1:] or [f"{m}/{p}" for m in ("gpt", "convnet")
                             for p in ("fp32", "fp16", "bf16")]
    print(json.dumps({case: run(case) for case in cases}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
