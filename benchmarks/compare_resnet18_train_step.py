#!/usr/bin/env python3
"""One ResNet-18 training step (batch 64, 1x28x28, train-mode BN, softmax cross-entropy,
backward, SGD with momentum 0.9) on the CPU: spmd's Google Benchmark and PyTorch (python3-torch,
the same model and threads) in one run; prints both times and the ratio.

usage: python3 benchmarks/compare_resnet18_train_step.py [--build build] [--batch 64] [--reps 5] [--rounds 1]
       [--dtype f32|f64|bf16] [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)
--dtype f64: both steps in double precision (default batch 8), as a gradient check or a reference
run takes them: oneDNN has no f64, so spmd's convolutions are its own direct f64 loops.
--dtype bf16: mixed precision, spmd's model applied with compute = bf16 (the sample's --precision
bf16) beside the forward and loss under torch.autocast("cpu", bfloat16), the backward and SGD
outside it, as PyTorch's recipe has it; on a CPU with AVX512-BF16 or AMX both run oneDNN's bf16
convolutions, elsewhere spmd emulates them (the f32 kernels between bf16 roundings).
Run with Debian's /usr/bin/python3 (where python3-torch lives)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, side_by_side, torch_resnet18  # noqa: E402


def time_torch(batch, reps, threads, dtype="f32"):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    real = torch.float64 if dtype == "f64" else torch.float32  # bf16: f32 parameters, autocast
    model = torch_resnet18().train().to(real)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28, dtype=real)
    y = torch.arange(batch) % 10

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "ResNet-18 training step, 1x28x28, SGD momentum",
                 "bench_resnet18_train_step", lambda batch: f"BM_ResNet18TrainStep/batch:{batch}/plan:1/fuse:1/layouts:1/",
                 time_torch, f64_name_of=lambda batch: f"BM_ResNet18TrainStepF64/batch:{batch}/",
                 bf16_name_of=lambda batch: f"BM_ResNet18TrainStepBf16/batch:{batch}/")

if __name__ == "__main__":
    main()
