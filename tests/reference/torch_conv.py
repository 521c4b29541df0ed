#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest.ConvolutionOptionsMatchPyTorch: a convolution of DIR's
"x.<name>" with "weight.<name>" and "bias.<name>" in f64 (torch.nn.functional.conv2d, conv1d for a
rank-3 x reading the second number of each pair, conv3d for a rank-5 x with the depth's numbers
last, or conv_transpose2d, conv_transpose3d for a rank-5 x), and the gradients of
sum(result * "g.<name>") with respect to the input, weight and bias, written back as "y.<name>",
"dx.<name>", "dweight.<name>" and "dbias.<name>". Each case comes on the command line as
NAME KIND SH SW PH PW DH DW GROUPS OPH OPW SD PD DD OPD (KIND: conv or transposed; stride, padding,
dilation, groups, output padding; stride, padding, dilation and output padding along a rank-5 x's
depth), so that the C++ test defines them once. Files in DIR as
tests/reference/exchange.py describes.

usage: torch_conv.py DIR [NAME KIND SH SW PH PW DH DW GROUPS OPH OPW SD PD DD OPD]...
"""
import sys

import torch.nn.functional as F

from exchange import read, write


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 15):
        name, kind = specs[at], specs[at + 1]
        sh, sw, ph, pw, dh, dw, groups, oph, opw, sd, pd, dd, opd = (int(v) for v in specs[at + 2:at + 15])
        x, weight, bias = (arrays[part + "." + name].clone().requires_grad_() for part in ("x", "weight", "bias"))
        if kind == "transposed" and x.dim() == 5:
            y = F.conv_transpose3d(x, weight, bias, stride=(sd, sh, sw), padding=(pd, ph, pw),
                                   output_padding=(opd, oph, opw), groups=groups, dilation=(dd, dh, dw))
        elif kind == "transposed":
            y = F.conv_transpose2d(x, weight, bias, stride=(sh, sw), padding=(ph, pw), output_padding=(oph, opw),
                                   groups=groups, dilation=(dh, dw))
        elif x.dim() == 5:
            y = F.conv3d(x, weight, bias, stride=(sd, sh, sw), padding=(pd, ph, pw), dilation=(dd, dh, dw), groups=groups)
        elif x.dim() == 3:
            y = F.conv1d(x, weight, bias, stride=sw, padding=pw, dilation=dw, groups=groups)
        else:
            y = F.conv2d(x, weight, bias, stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        for part, tensor in (("dx", x), ("dweight", weight), ("dbias", bias)):
            write(directory, part + "." + name, tensor.grad)


if __name__ == "__main__":
    main()
