#!/usr/bin/env python3
"""One ResNet-18 training step (batch 64, 1x28x28, train-mode BN, softmax cross-entropy,
backward, SGD with momentum 0.9) on the CPU: spmd's Google Benchmark and PyTorch (python3-torch,
the same model and threads) in one run; prints both times and the ratio.

usage: python3 benchmarks/compare_resnet18_train_step.py [--build build] [--batch 64] [--reps 5]
Run with Debian's /usr/bin/python3 (where python3-torch lives)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import time_spmd, torch_resnet18  # noqa: E402


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

    for _ in range(2):
        step()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3, torch.get_num_threads(), torch.__version__


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="threads for both sides (OMP_NUM_THREADS / torch.set_num_threads)")
    args = parser.parse_args()
    ours = time_spmd(args.build, args.batch, args.reps, args.threads,
                     "bench_resnet18_train_step", "BM_ResNet18TrainStep")
    theirs, threads, version = time_torch(args.batch, max(args.reps * 2, 10), args.threads)
    print(f"ResNet-18 training step, batch {args.batch}, 1x28x28, SGD momentum, CPU "
          f"({os.cpu_count()} cores)")
    print(f"  spmd (cpu:0, {args.threads} threads)    : {ours:8.1f} ms/step  {args.batch / ours * 1e3:8.1f} img/s")
    print(f"  PyTorch {version} ({threads} threads): {theirs:8.1f} ms/step  {args.batch / theirs * 1e3:8.1f} img/s")
    print(f"  ratio spmd/PyTorch time    : {ours / theirs:8.3f}  (< 1 means spmd is faster)")


if __name__ == "__main__":
    main()
