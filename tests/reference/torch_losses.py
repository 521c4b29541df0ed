#!/usr/bin/env python3
"""PyTorch side of LossesTorchTest: torch.nn.functional's loss KIND of DIR's "x.<name>" (the
prediction) and "t.<name>" (the target: f64, or i32 class indices) in f64 with REDUCTION (none, mean,
sum, or batchMean: the sum divided by the first dimension, kl_div's "batchmean"), and the gradient of
sum(result * "g.<name>") with respect to x and a float target, written back as "y.<name>",
"dx.<name>" and "dt.<name>". Each case comes on the command line as NAME KIND REDUCTION ARG: KIND mse,
l1, smooth_l1 (ARG: beta), huber (ARG: delta), bce (probabilities), bce_logits (with "w.<name>" as
pos_weight when given), ce (F.cross_entropy, ARG: label_smoothing), nll, or kl (ARG: 1 for
log_target); or the norms (REDUCTION none): norm (torch.linalg.vector_norm, ARG: ord/dims, comma-separated),
normalize (F.normalize, ARG: p/dim) and cosine (F.cosine_similarity of x and the target, ARG: dim). Files in
DIR as tests/reference/exchange.py describes.

usage: torch_losses.py DIR [NAME KIND REDUCTION ARG]...
"""
import sys
import warnings

import torch
import torch.nn.functional as F

from exchange import read, write


def loss(kind, reduction, arg, x, t, w):
    number = float(arg)
    if kind == "mse":
        return F.mse_loss(x, t, reduction=reduction)
    if kind == "l1":
        return F.l1_loss(x, t, reduction=reduction)
    if kind == "smooth_l1":
        return F.smooth_l1_loss(x, t, reduction=reduction, beta=number)
    if kind == "huber":
        return F.huber_loss(x, t, reduction=reduction, delta=number)
    if kind == "bce":
        return F.binary_cross_entropy(x, t, reduction=reduction)
    if kind == "bce_logits":
        return F.binary_cross_entropy_with_logits(x, t, reduction=reduction, pos_weight=w)
    if kind == "ce":
        return F.cross_entropy(x, t.long() if t.dtype == torch.int32 else t, reduction=reduction, label_smoothing=number)
    if kind == "nll":
        return F.nll_loss(x, t.long(), reduction=reduction)
    if kind == "kl":
        return F.kl_div(x, t, reduction=reduction, log_target=bool(number))
    raise SystemExit("torch_losses.py: unknown kind " + kind)


def norm(kind, arg, x, t):
    """The norms: ARG ord/axes (norm, normalize: p/dim) or the dim (cosine)."""
    if kind == "cosine":
        return F.cosine_similarity(x, t, dim=int(arg))
    ord_text, axes = arg.split("/")
    ord_ = float(ord_text)
    dims = tuple(int(a) for a in axes.split(","))
    if kind == "norm":
        return torch.linalg.vector_norm(x, ord=ord_, dim=dims)
    if kind == "normalize":
        return F.normalize(x, p=ord_, dim=dims[0])
    raise SystemExit("torch_losses.py: unknown kind " + kind)


def main():
    warnings.filterwarnings("ignore", message="reduction: 'mean' divides")  # kl_div's default, asked for
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 4):
        name, kind, reduction, arg = specs[at:at + 4]
        x = arrays["x." + name].clone().requires_grad_()
        t = arrays["t." + name].clone()
        if t.dtype == torch.float64:
            t.requires_grad_()
        w = arrays.get("w." + name)
        if kind in ("norm", "normalize", "cosine"):
            y = norm(kind, arg, x, t)
        elif reduction == "batchMean" and kind == "kl":
            y = loss(kind, "batchmean", arg, x, t, w)
        elif reduction == "batchMean":
            y = loss(kind, "sum", arg, x, t, w) / x.shape[0]
        else:
            y = loss(kind, reduction, arg, x, t, w)
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        write(directory, "dx." + name, x.grad)
        if t.requires_grad:
            write(directory, "dt." + name, t.grad)


if __name__ == "__main__":
    main()
