#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest's CNN case: the seeds' Flax CNN (frontend/models/Cnn.h) in
NCHW with the parameters and batch spmd wrote to DIR; writes back, in float32 and in float64,
the loss (the seed's: the sum over the batch of the cross-entropy of the log_softmax output) and
the gradient of every parameter. Files in DIR as tests/reference/exchange.py describes.

usage: torch_cnn.py DIR
"""
import sys

import torch
from torch.nn import functional as F

from exchange import read, write

PARAMS = ["conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
          "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def step(arrays, dtype, directory, prefix):
    p = {name: arrays[name].to(dtype).clone().requires_grad_() for name in PARAMS}
    x = arrays["input.x"].to(dtype)
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=1)), 2)
    x = F.avg_pool2d(torch.relu(F.conv2d(x, p["conv2.weight"], p["conv2.bias"], padding=1)), 2)
    x = torch.relu(F.linear(x.reshape(x.shape[0], -1), p["fc1.weight"], p["fc1.bias"]))
    log_probs = F.log_softmax(F.linear(x, p["fc2.weight"], p["fc2.bias"]), dim=-1)
    loss = F.cross_entropy(log_probs, arrays["input.y"].long(), reduction="sum")
    loss.backward()
    write(directory, prefix + ".loss", loss.reshape(()))
    for name in PARAMS:
        write(directory, prefix + ".grad." + name, p[name].grad)


def main():
    directory = sys.argv[1]
    arrays = read(directory)
    step(arrays, torch.float32, directory, "torch32")
    step(arrays, torch.float64, directory, "torch64")


if __name__ == "__main__":
    main()
