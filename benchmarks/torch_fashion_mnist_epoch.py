#!/usr/bin/env python3
"""PyTorch's time for one epoch (or --epochs) of the sample's training on this machine, for
comparison with `resnet18_fashion_mnist --epochs 1` (same model, data, batch, optimizer; BN in
training mode, plain SGD as the seeds), then test accuracy with BN in inference form. On a GPU
(--device cuda, the seeds' run of the GPU bundle: build/gpu-bundle/seeds) the data sits on the
GPU, TF32 is off as spmd runs f32, and --mode picks cudnn.benchmark (fastest) or
torch.use_deterministic_algorithms (deterministic).

usage: /usr/bin/python3 benchmarks/torch_fashion_mnist_epoch.py [--width 64] [--batch 512]
       [--lr 0.2] [--momentum 0] [--epochs 1] [--train-limit 0] [--test-limit 0] [--threads N]
       [--device cpu|cuda] [--mode fastest|deterministic] [--smoke]
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpu_step import set_mode  # noqa: E402


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
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--mode", default="fastest", choices=("fastest", "deterministic"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.width, args.train_limit, args.test_limit, args.batch = 2, 64, 100, 16
    if args.epochs < 1 or args.batch < 1:
        parser.error("--epochs and --batch must be at least 1")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit(f"--device cuda: this PyTorch ({torch.__version__}) sees no GPU")
        if args.mode == "deterministic":  # cuBLAS repeats its bits only with a fixed workspace
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        set_mode(torch, args.mode)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = load(args.data_dir, "train")
    if args.train_limit:
        x, y = x[:args.train_limit], y[:args.train_limit]
    tx, ty = load(args.data_dir, "test")
    if args.test_limit:
        tx, ty = tx[:args.test_limit], ty[:args.test_limit]
    device = torch.device(args.device)
    x, y, tx, ty = x.to(device), y.to(device), tx.to(device), ty.to(device)
    model = ResNet18(args.width)
    for m in model.modules():  # the seeds' (and spmd's default) Normal(0.01) init
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.normal_(m.weight, 0, 0.01)
            torch.nn.init.zeros_(m.bias)
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    steps = len(y) // args.batch

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def accuracy():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(ty), 500):
                correct += int((model(tx[i:i + 500]).argmax(1) == ty[i:i + 500]).sum())
        model.train()
        return 100 * correct / len(ty)

    start = time.perf_counter()
    train_seconds = 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(len(y)).to(device)
        model.train()
        sync()
        epoch_start = time.perf_counter()
        for s in range(steps):
            idx = order[s * args.batch:(s + 1) * args.batch]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if args.epochs == 1 and (s + 1) % max(1, steps // 10) == 0:
                print(f"step {s + 1}/{steps}: loss {loss.item():.4f} "
                      f"({(s + 1) * args.batch / (time.perf_counter() - epoch_start):.1f} img/s)", flush=True)
        sync()
        seconds = time.perf_counter() - epoch_start
        train_seconds += seconds
        if args.epochs > 1:
            print(f"epoch {epoch + 1}/{args.epochs}: train loss {loss.item():.4f} in {seconds:.1f} s "
                  f"({steps * args.batch / seconds:.1f} img/s), test accuracy {accuracy():.2f}%", flush=True)
    where = f"{torch.cuda.get_device_name()} ({args.mode})" if args.device == "cuda" else f"{args.threads} threads"
    print(f"PyTorch {torch.__version__}, {where}: width {args.width}, batch {args.batch}, "
          f"lr {args.lr}: {args.epochs} epoch{'s' if args.epochs > 1 else ''} of {steps * args.batch} images in "
          f"{train_seconds:.1f} s ({args.epochs * steps * args.batch / train_seconds:.1f} img/s; "
          f"{time.perf_counter() - start:.1f} s with evaluation), test accuracy {accuracy():.2f}%")


if __name__ == "__main__":
    main()
