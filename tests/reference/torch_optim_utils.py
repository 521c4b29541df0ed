#!/usr/bin/env python3
"""PyTorch side of OptimUtilsTorchTest, from the f64 tensors spmd wrote to DIR (files as
tests/reference/exchange.py describes):
  clip:   torch.nn.utils.clip_grad_norm_ on "clip.<case>.<p>" with max norm MAX_NORM; writes
          "clipped.<case>.<p>" and "norm.<case>";
  groups: torch.optim.SGD / Adam / AdamW with param_groups (what the C++ test's groups say:
          biases and BatchNorm without weight decay, the head at a quarter of the rate and, for
          SGD, momentum 0.5), the rate of every group times 0.5 every 4 steps (StepLR's rule set
          by hand), over STEPS steps with gradients "grad.<t>.<p>" from "param.<p>"; writes
          "<optimizer>.<p>";
  ema:    torch.optim.swa_utils.AveragedModel with avg_fn decay * a + (1 - decay) * p over the
          parameter values "ema_param.<t>.<p>"; writes "ema.<p>".

usage: torch_optim_utils.py DIR MAX_NORM STEPS LR MOMENTUM WEIGHT_DECAY DECAY
"""
import sys

import torch

from exchange import read, write


def clip(arrays, directory, max_norm):
    for case in sorted({k.split(".")[1] for k in arrays if k.startswith("clip.")}):
        names = sorted(k for k in arrays if k.startswith("clip.%s." % case))
        grads = [arrays[n].clone() for n in names]
        params = [torch.zeros_like(g, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        write(directory, "norm." + case, norm.reshape([]))
        for n, p in zip(names, params):
            write(directory, "clipped." + n[len("clip."):], p.grad)


def in_group(name):
    if name.endswith(".bias") or name.startswith("bn"):
        return "no_decay"
    if name.startswith("head."):
        return "head"
    return "rest"


def groups(arrays, directory, steps, lr, momentum, weight_decay):
    names = sorted(k[len("param."):] for k in arrays if k.startswith("param."))

    def param_groups(params, sgd):
        by = {"rest": [], "no_decay": [], "head": []}
        for n, p in zip(names, params):
            by[in_group(n)].append(p)
        head = {"params": by["head"], "lr": lr / 4}
        if sgd:
            head["momentum"] = 0.5
        return [{"params": by["rest"]}, {"params": by["no_decay"], "weight_decay": 0.0}, head]

    optimizers = {
        "sgd": lambda p: torch.optim.SGD(param_groups(p, True), lr=lr, momentum=momentum,
                                         weight_decay=weight_decay),
        "adam": lambda p: torch.optim.Adam(param_groups(p, False), lr=lr, weight_decay=weight_decay),
        "adamw": lambda p: torch.optim.AdamW(param_groups(p, False), lr=lr, weight_decay=weight_decay),
    }
    for which, make in optimizers.items():
        params = [arrays["param." + n].clone().requires_grad_() for n in names]
        optimizer = make(params)
        base = [g["lr"] for g in optimizer.param_groups]
        for t in range(steps):
            for g, b in zip(optimizer.param_groups, base):
                g["lr"] = b * 0.5 ** (t // 4)
            for n, p in zip(names, params):
                p.grad = arrays["grad.%d.%s" % (t, n)].clone()
            optimizer.step()
        for n, p in zip(names, params):
            write(directory, which + "." + n, p)


def ema(arrays, directory, decay):
    names = sorted({k.split(".", 2)[2] for k in arrays if k.startswith("ema_param.")})
    steps = len({k.split(".")[1] for k in arrays if k.startswith("ema_param.")})
    module = torch.nn.ParameterList([torch.nn.Parameter(arrays["ema_param.0." + n].clone()) for n in names])
    averaged = torch.optim.swa_utils.AveragedModel(
        module, avg_fn=lambda a, p, count: decay * a + (1 - decay) * p)
    for t in range(steps):
        with torch.no_grad():
            for n, p in zip(names, module):
                p.copy_(arrays["ema_param.%d.%s" % (t, n)])
        averaged.update_parameters(module)
    for n, p in zip(names, averaged.module):
        write(directory, "ema." + n, p)


def main():
    directory = sys.argv[1]
    max_norm = float(sys.argv[2])
    steps = int(sys.argv[3])
    lr, momentum, weight_decay, decay = (float(a) for a in sys.argv[4:8])
    arrays = read(directory)
    clip(arrays, directory, max_norm)
    groups(arrays, directory, steps, lr, momentum, weight_decay)
    ema(arrays, directory, decay)


if __name__ == "__main__":
    main()
