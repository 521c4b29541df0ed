#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest's small CNNs (frontend/models/Cnn.h), NCHW, with the
parameters and batch spmd wrote to DIR: "flax", the seeds' Flax CNN with the seed's loss (the
batch's summed cross-entropy of the log_softmax output), or "lenet", d2l's multi-GPU LeNet with
the mean cross-entropy. Writes back, in float32 and in float64, the loss and the gradient of
every parameter, and the same of the float32 step under torch.autocast("cpu", bfloat16)
("torchbf16": bf16 convolutions and matmuls, f32 parameters, gradients and loss). Files in DIR
as tests/reference/exchange.py describes.

usage: torch_cnn.py DIR flax|lenet
"""
import sys

import torch
from torch.nn import functional as F

from exchange import read, write

PARAMS = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
          "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def step(arrays, model, dtype, directory, prefix, autocast=False):
    p = {name: arrays[name].to(dtype).clone().requires_grad_() for name in PARAMS}
    x = arrays["input.x"].to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = forward(p, x, arrays["input.y"].long(), model)
    loss.backward()
    write(directory, prefix + ".loss", loss.reshape(()))
    for name in PARAMS:
        write(directory, prefix + ".grad." + name, p[name].grad)


def forward(p, x, labels, model):
    pad = 1 if model == "flax" else 0
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=pad)), 2)
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv2.weight"], p["conv2.bias"], padding=pad)), 2)
    x = torch.relu(F.linear(x.reshape(x.shape[0], -1), p["fc1.weight"], p["fc1.bias"]))
    logits = F.linear(x, p["fc2.weight"], p["fc2.bias"])
    if model == "flax":
        return F.cross_entropy(F.log_softmax(logits, dim=-1), labels, reduction="sum")
    return F.cross_entropy(logits, labels)


def main():
    directory, model = sys.argv[1], sys.argv[2]
    if model not in ("flax", "lenet"):
        sys.exit(f"torch_cnn.py: unknown model {model!r} (flax or lenet)")
    arrays = read(directory)
    step(arrays, model, torch.float32, directory, "torch32")
    step(arrays, model, torch.float64, directory, "torch64")
    step(arrays, model, torch.float32, directory, "torchbf16", autocast=True)


if __name__ == "__main__":
    main()
