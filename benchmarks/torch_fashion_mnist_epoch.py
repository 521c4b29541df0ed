#!/usr/bin/env python3
"""PyTorch's time for one epoch of the sample's training on this machine, for comparison with
`resnet18_fashion_mnist --epochs 1` (same model, data, batch, optimizer; BN in training mode,
plain SGD as the seeds), then test accuracy with BN in inference form.

usage: /usr/bin/python3 benchmarks/torch_fashion_mnist_epoch.py [--width 64] [--batch 512]
       [--lr 0.2] [--momentum 0] [--train-limit 0] [--test-limit 0] [--threads N] [--smoke]
--smoke (CI): width 2, 64 training and 100 test images, batch 16: checks that it runs."""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from torch_resnet18 import ResNet18  # noqa: E402  (module names match spmd's parameter paths)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--train-limit", type=int, default=0)
    parser.add_argument("--test-limit", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.width, args.train_limit, args.test_limit, args.batch = 2, 64, 100, 16
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = load(args.data_dir, "train")
    if args.train_limit:
        x, y = x[:args.train_limit], y[:args.train_limit]
    tx, ty = load(args.data_dir, "test")
    if args.test_limit:
        tx, ty = tx[:args.test_limit], ty[:args.test_limit]
    model = ResNet18(args.width)
    for m in model.modules():  # the seeds' (and spmd's default) Normal(0.01) init
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.normal_(m.weight, 0, 0.01)
            torch.nn.init.zeros_(m.bias)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    order = torch.randperm(len(y))
    steps = len(y) // args.batch
    model.train()
    start = time.perf_counter()
    for s in range(steps):
        idx = order[s * args.batch:(s + 1) * args.batch]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (s + 1) % max(1, steps // 10) == 0:
            print(f"step {s + 1}/{steps}: loss {loss.item():.4f} "
                  f"({(s + 1) * args.batch / (time.perf_counter() - start):.1f} img/s)", flush=True)
    seconds = time.perf_counter() - start
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(ty), 500):
            correct += int((model(tx[i:i + 500]).argmax(1) == ty[i:i + 500]).sum())
    print(f"PyTorch {torch.__version__}, {args.threads} threads: width {args.width}, batch {args.batch}, "
          f"lr {args.lr}: 1 epoch of {steps * args.batch} images in {seconds:.1f} s "
          f"({steps * args.batch / seconds:.1f} img/s), test accuracy {100 * correct / len(ty):.2f}%")


if __name__ == "__main__":
    main()
