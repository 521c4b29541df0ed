#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest.PoolingVariantsMatchPyTorch: torch.nn.functional's
max_pool2d (with dilation) and avg_pool2d (with count_include_pad) of DIR's "x", each result
and the input gradient of sum(result * "g.<name>"), written back as "y.<name>" and "dx.<name>".
Each variant comes on the command line as NAME KIND KH KW SH SW PH PW DH DW COUNT_INCLUDE_PAD,
so that the C++ test defines them once. Files in DIR as tests/reference/exchange.py describes.

usage: torch_pool.py DIR [NAME KIND KH KW SH SW PH PW DH DW COUNT_INCLUDE_PAD]...
"""
import sys

import torch
import torch.nn.functional as F

from exchange import read, write


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 11):
        name, kind = specs[at], specs[at + 1]
        kh, kw, sh, sw, ph, pw, dh, dw, count_pad = (int(v) for v in specs[at + 2:at + 11])
        x = arrays["x"].clone().requires_grad_()
        if kind == "max":
            y = F.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw))
        else:
            assert (dh, dw) == (1, 1), "torch's avg_pool2d has no dilation"
            y = F.avg_pool2d(x, (kh, kw), (sh, sw), (ph, pw), count_include_pad=bool(count_pad))
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        write(directory, "dx." + name, x.grad)


if __name__ == "__main__":
    main()
