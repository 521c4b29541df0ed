#!/usr/bin/env python3
"""PyTorch side of ElementwiseTorchTest: the elementwise ops and their autograd gradients at edge
values, from the inputs spmd wrote to DIR ("x.<dtype>", and "a.<dtype>", "b.<dtype>" for the
binary ops). Writes back "<op>.<dtype>.y" and, for the unary ops, "<op>.<dtype>.dx", the gradient
of sum(op(x)). Files in DIR as tests/reference/exchange.py describes.

usage: torch_elementwise.py DIR
"""
import sys

import torch
from torch.nn import functional as F

from exchange import read, write

UNARY = {"exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh,
         "sigmoid": torch.sigmoid, "gelu": F.gelu, "relu": torch.relu, "neg": torch.neg,
         "abs": torch.abs, "sin": torch.sin, "cos": torch.cos,
         "log1p": torch.log1p, "expm1": torch.expm1, "erf": torch.erf, "erfinv": torch.erfinv,
         "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "sign": torch.sign, "silu": F.silu, "softplus": F.softplus,
         "logsigmoid": F.logsigmoid, "elu": F.elu, "leaky_relu": F.leaky_relu, "mish": F.mish}
BINARY = {"div": torch.div, "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow}


def main():
    directory = sys.argv[1]
    arrays = read(directory)
    for dtype in ("f32", "f64"):
        for name, fn in UNARY.items():
            x = arrays["x." + dtype].clone().requires_grad_()
            y = fn(x)
            y.sum().backward()
            write(directory, "%s.%s.y" % (name, dtype), y)
            write(directory, "%s.%s.dx" % (name, dtype), x.grad)
        for name, fn in BINARY.items():
            write(directory, "%s.%s.y" % (name, dtype), fn(arrays["a." + dtype], arrays["b." + dtype]))


if __name__ == "__main__":
    main()
