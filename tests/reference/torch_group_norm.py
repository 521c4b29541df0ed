#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest.GroupNormMatchesPyTorch: torch.nn.functional.group_norm of
DIR's "x.<name>" with "weight.<name>" and "bias.<name>", in f64, and the gradients of
sum(result * "g.<name>") with respect to the input, weight and bias, written back as "y.<name>",
"dx.<name>", "dweight.<name>" and "dbias.<name>". Each case comes on the command line as
NAME GROUPS EPSILON, so that the C++ test defines them once. Files in DIR as
tests/reference/exchange.py describes.

usage: torch_group_norm.py DIR [NAME GROUPS EPSILON]...
"""
import sys

import torch.nn.functional as F

from exchange import read, write


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 3):
        name, groups, epsilon = specs[at], int(specs[at + 1]), float(specs[at + 2])
        x, weight, bias = (arrays[part + "." + name].clone().requires_grad_() for part in ("x", "weight", "bias"))
        y = F.group_norm(x, groups, weight, bias, epsilon)
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        for part, tensor in (("dx", x), ("dweight", weight), ("dbias", bias)):
            write(directory, part + "." + name, tensor.grad)


if __name__ == "__main__":
    main()
