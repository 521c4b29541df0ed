#!/usr/bin/env python3
"""Loads a checkpoint of the spmd Fashion-MNIST sample into the same ResNet-18 written in
PyTorch and evaluates it on the test set: the names and layouts map one to one (parameters and
BatchNorm running statistics load with strict key checking; only PyTorch's own
num_batches_tracked counters are absent).

usage: /usr/bin/python3 samples/resnet18_fashion_mnist/eval_torch.py runs/fashion_mnist/checkpoint.safetensors
       [--data-dir /usr/share/datasets/fashion-mnist] [--limit N]
The safetensors file is parsed here directly (8-byte header length, JSON header, raw data), so
only python3-torch is needed."""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

# The PyTorch ResNet-18 whose module names are spmd's parameter paths (also TorchReferenceTest's).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from torch_resnet18 import ResNet18  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I32": torch.int32}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    meta = header.pop("__metadata__", {})
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])
    return tensors, meta


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--data-dir", default=os.environ.get("SPMD_FASHION_MNIST_DIR",
                                                          "/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--limit", type=int, default=0, help="first N test images (0: all)")
    args = parser.parse_args()

    tensors, meta = load_safetensors(args.checkpoint)
    width = int(meta["width"])
    model = ResNet18(width)
    state = {}
    for name, value in tensors.items():
        kind, _, key = name.partition(".")
        if kind in ("params", "state"):
            state[key] = value.to(torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        sys.exit(f"names do not map one to one: missing {missing}, unexpected {unexpected}")

    images = read_idx(os.path.join(args.data_dir, "t10k-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(args.data_dir, "t10k-labels-idx1-ubyte.gz"), 8)
    x = torch.from_numpy(images.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for start in range(0, len(y), 500):
            logits = model(x[start:start + 500])
            correct += int((logits.argmax(1) == y[start:start + 500]).sum())
            loss += float(F.cross_entropy(logits.double(), y[start:start + 500], reduction="sum"))
    print(f"checkpoint {args.checkpoint}: width {width}, epoch {meta.get('epoch')} done, "
          f"{len(state)} tensors loaded by name into PyTorch {torch.__version__}")
    print(f"PyTorch test accuracy: {100.0 * correct / len(y):.2f}% on {len(y)} images")
    print(f"PyTorch test loss: {loss / len(y):.6f}")


if __name__ == "__main__":
    main()
