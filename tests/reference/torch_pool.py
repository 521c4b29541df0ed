#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest.PoolingVariantsMatchPyTorch: torch.nn.functional's
max_pool2d (with dilation) and avg_pool2d (with count_include_pad) of a rank-4 "x.<name>" in DIR,
or max_pool3d and avg_pool3d of a rank-5 one, each result and the input gradient of
sum(result * "g.<name>"), written back as "y.<name>" and "dx.<name>". Each variant comes on the
command line as NAME KIND KD KH KW SD SH SW PD PH PW DD DH DW COUNT_INCLUDE_PAD (window, stride,
padding, dilation; a rank-4 x reads the last two of each), so that the C++ test defines them once.
Files in DIR as tests/reference/exchange.py describes.

usage: torch_pool.py DIR [NAME KIND KD KH KW SD SH SW PD PH PW DD DH DW COUNT_INCLUDE_PAD]...
"""
import sys

import torch.nn.functional as F

from exchange import read, write


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 15):
        name, kind = specs[at], specs[at + 1]
        numbers = [int(v) for v in specs[at + 2:at + 15]]
        window, stride, padding, dilation = (tuple(numbers[i:i + 3]) for i in range(0, 12, 3))
        count_pad = bool(numbers[12])
        x = arrays["x." + name].clone().requires_grad_()
        if x.dim() == 4:
            window, stride, padding, dilation = (v[1:] for v in (window, stride, padding, dilation))
        if kind == "max":
            pool = F.max_pool3d if x.dim() == 5 else F.max_pool2d
            y = pool(x, window, stride, padding, dilation)
        else:
            assert all(d == 1 for d in dilation), "torch's avg_pool has no dilation"
            pool = F.avg_pool3d if x.dim() == 5 else F.avg_pool2d
            y = pool(x, window, stride, padding, count_include_pad=count_pad)
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        write(directory, "dx." + name, x.grad)


if __name__ == "__main__":
    main()
