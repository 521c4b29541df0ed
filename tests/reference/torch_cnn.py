#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest's small CNNs (frontend/models/Cnn.h), NCHW, with the
parameters and batch spmd wrote to DIR: "flax", the seeds' Flax CNN with the seed's loss (the
batch's summed cross-entropy of the log_softmax output), or "lenet", d2l's multi-GPU LeNet with
the mean cross-entropy. Writes back, in float32 and in float64, the loss and the gradient of
every parameter. Files in DIR as tests/reference/exchange.py describes.

usage: torch_cnn.py DIR flax|lenet
"""
import sys

import torch
from torch.nn import functional as F

from exchange import read, write

PARAMS = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
          "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def step(arrays, model, dtype, directory, prefix):
    p = {name: arrays[name].to(dtype).clone().requires_grad_() for name in PARAMS}
    x = arrays["input.x"].to(dtype)
    pad = 1 if model == "flax" else 0
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=pad)), 2)
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv2.weight"], p["conv2.bias"], padding=pad)), 2)
    x = torch.relu(F.linear(x.reshape(x.shape[0], -1), p["fc1.weight"], p["fc1.bias"]))
    logits = F.linear(x, p["fc2.weight"], p["fc2.bias"])
    labels = arrays["input.y"].long()
    if model == "flax":
        loss = F.cross_entropy(F.log_softmax(logits, dim=-1), labels, reduction="sum")
    else:
        loss = F.cross_entropy(logits, labels)
    loss.backward()
    write(directory, prefix + ".loss", loss.reshape(()))
    for name in PARAMS:
        write(directory, prefix + ".grad." + name, p[name].grad)


def main():
    directory, model = sys.argv[1], sys.argv[2]
    if model not in ("flax", "lenet"):
        sys.exit(f"torch_cnn.py: unknown model {model!r} (flax or lenet)")
    arrays = read(directory)
    step(arrays, model, torch.float32, directory, "torch32")
    step(arrays, model, torch.float64, directory, "torch64")


if __name__ == "__main__":
    main()
