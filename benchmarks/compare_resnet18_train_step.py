#!/usr/bin/env python3
"""One ResNet-18 training step (batch 64, 1x28x28, train-mode BN, softmax cross-entropy,
backward, SGD with momentum 0.9) on the CPU: spmd's Google Benchmark and PyTorch (python3-torch,
the same model and threads) in one run; prints both times and the ratio.

usage: python3 benchmarks/compare_resnet18_train_step.py [--build build] [--batch 64] [--reps 5] [--rounds 1]
       [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)
Run with Debian's /usr/bin/python3 (where python3-torch lives)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, side_by_side, torch_resnet18  # noqa: E402


def time_torch(batch, reps, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_resnet18().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.arange(batch) % 10

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "ResNet-18 training step, 1x28x28, SGD momentum",
                 "bench_resnet18_train_step", lambda batch: f"BM_ResNet18TrainStep/batch:{batch}/plan:1/fuse:1/layouts:1/",
                 time_torch)

if __name__ == "__main__":
    main()
