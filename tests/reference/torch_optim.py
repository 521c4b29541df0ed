#!/usr/bin/env python3
"""PyTorch side of OptimizerTorchTest: torch.optim.SGD, Adam, AdamW, RMSprop and Adagrad over several steps with a
different gradient each step, from the f64 parameters and gradients spmd wrote to DIR ("param.<p>",
"grad.<t>.<p>"). Writes back the parameters after the last step ("<optimizer>.<p>"). The
hyperparameters come as numbers on the command line, so that the C++ test defines them once.
Files in DIR as tests/reference/exchange.py describes.

usage: torch_optim.py DIR STEPS LR MOMENTUM BETA1 BETA2 EPS WEIGHT_DECAY LR_DECAY INITIAL_ACCUMULATOR GROUP_MOMENTUM
(RMSprop's alpha is BETA2; its groups case gives parameter "b" GROUP_MOMENTUM and no weight decay)
"""
import sys

import torch

from exchange import read, write


def main():
    directory = sys.argv[1]
    steps = int(sys.argv[2])
    lr, momentum, beta1, beta2, eps, weight_decay, lr_decay, initial, group_momentum = (float(a) for a in sys.argv[3:12])
    arrays = read(directory)
    names = sorted(key[len("param."):] for key in arrays if key.startswith("param."))
    optimizers = {
        "sgd": lambda p: torch.optim.SGD(p, lr=lr, momentum=momentum, weight_decay=weight_decay,
                                         nesterov=True),
        "adam": lambda p: torch.optim.Adam(p, lr=lr, betas=(beta1, beta2), eps=eps,
                                           weight_decay=weight_decay),
        "adamw": lambda p: torch.optim.AdamW(p, lr=lr, betas=(beta1, beta2), eps=eps,
                                             weight_decay=weight_decay),
        "rmsprop": lambda p: torch.optim.RMSprop(p, lr=lr, alpha=beta2, eps=eps),
        "rmsprop_centered": lambda p: torch.optim.RMSprop(p, lr=lr, alpha=beta2, eps=eps, weight_decay=weight_decay,
                                                          momentum=momentum, centered=True),
        "rmsprop_groups": lambda p: torch.optim.RMSprop(
            [{"params": [q for n, q in zip(names, p) if n != "b"]},
             {"params": [q for n, q in zip(names, p) if n == "b"], "weight_decay": 0.0, "momentum": group_momentum}],
            lr=lr, alpha=beta2, eps=eps, weight_decay=weight_decay, momentum=momentum),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                                 initial_accumulator_value=initial, eps=eps),
    }
    for which, make in optimizers.items():
        params = [arrays["param." + n].clone().requires_grad_() for n in names]
        optimizer = make(params)
        for t in range(steps):
            for n, p in zip(names, params):
                p.grad = arrays["grad.%d.%s" % (t, n)].clone()
            optimizer.step()
        for n, p in zip(names, params):
            write(directory, which + "." + n, p)


if __name__ == "__main__":
    main()
