#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest.ConvolutionOptionsMatchPyTorch: torch.nn.functional.conv2d of
DIR's "x.<name>" with "weight.<name>" and "bias.<name>" in f64, and the gradients of
sum(result * "g.<name>") with respect to the input, weight and bias, written back as "y.<name>",
"dx.<name>", "dweight.<name>" and "dbias.<name>". Each case comes on the command line as
NAME STRIDE_H STRIDE_W PAD_H PAD_W DILATION_H DILATION_W GROUPS, so that the C++ test defines them
once. Files in DIR as tests/reference/exchange.py describes.

usage: torch_conv.py DIR [NAME SH SW PH PW DH DW GROUPS]...
"""
import sys

import torch.nn.functional as F

from exchange import read, write


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 8):
        name = specs[at]
        sh, sw, ph, pw, dh, dw, groups = (int(v) for v in specs[at + 1:at + 8])
        x, weight, bias = (arrays[part + "." + name].clone().requires_grad_() for part in ("x", "weight", "bias"))
        y = F.conv2d(x, weight, bias, stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        for part, tensor in (("dx", x), ("dweight", weight), ("dbias", bias)):
            write(directory, part + "." + name, tensor.grad)


if __name__ == "__main__":
    main()
