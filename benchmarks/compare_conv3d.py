#!/usr/bin/env python3
"""A 3-D convolution's forward and both gradients on the CPU (x [batch, 16, 16, 32, 32], a 3x3x3
filter to 32 channels, padding 1, the gradients of sum(y * g) with respect to x and the filter):
spmd's Google Benchmark (bench_conv3d_step: conv3d, composed of depth windows and one conv2d) and
torch.nn.functional.conv3d (python3-torch, the same threads) in one run; prints both times and
the ratio.

usage: /usr/bin/python3 benchmarks/compare_conv3d.py [--build build] [--batch 8] [--reps 5] [--rounds 1]
       [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, side_by_side  # noqa: E402

IN, OUT, DEPTH, SIDE = 16, 32, 16, 32


def time_torch(batch, reps, threads):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.randn(batch, IN, DEPTH, SIDE, SIDE).requires_grad_()
    w = (0.1 * torch.randn(OUT, IN, 3, 3, 3)).requires_grad_()
    g = torch.randn(batch, OUT, DEPTH, SIDE, SIDE)

    def step():
        x.grad, w.grad = None, None
        (F.conv3d(x, w, padding=1) * g).sum().backward()
        return w.grad

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "conv3d forward and both gradients, 16 -> 32 channels, 16x32x32, 3x3x3",
                 "bench_conv3d_step", lambda batch: f"BM_Conv3dGradients/batch:{batch}/", time_torch,
                 unit="volumes", batch=8)


if __name__ == "__main__":
    main()
