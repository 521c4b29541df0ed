#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest: the seeds' ResNet-18 (d2l's variant) with the parameters,
BN state and batch that spmd wrote to DIR; writes back, in float32 and in float64, the loss, the
gradient of every parameter, the BN running statistics after the step, the parameters after
one torch.optim.SGD step, and the module's parameter count and number of parameter tensors.

The float64 step also runs with the ReLU masks of a float32 step held fixed (each ReLU
multiplies by the mask the f32 step took instead of testing its own input): with the masks
fixed, the step is a smooth function of its inputs, so an f32 step differs from it by rounding
alone, while an f32 ReLU input within rounding of zero may fall on either side of it in the
unmasked step. Masks of PyTorch's own f32 step (prefix torch64_m32) and, where spmd wrote the
f32 activations its ReLUs saw (act.<layer>: stem.bn, stageS.B.bn1, and the block outputs
stageS.B), spmd's (prefix torch64_mspmd). torch.flips_* counts the elements whose f32 mask
differs from the unmasked f64 step's.

Files in DIR as tests/reference/exchange.py describes. Parameter names follow spmd's (they
match this module's state_dict keys).

usage: torch_resnet18.py DIR LR MOMENTUM WEIGHT_DECAY
"""
import sys

import torch
from torch import nn

from exchange import read, write


def plain_relu(_site, t):
    """The model's ReLUs as they are (the default: nothing recorded, for the benchmarks)."""
    return torch.relu(t)


class Relu:
    """The model's ReLUs by site name (the layer whose output feeds it, or the block for the ReLU
    after the sum): plain, recording each input's mask, or multiplying by given masks."""

    def __init__(self, fixed=None):
        self.fixed = fixed
        self.masks = {}

    def __call__(self, site, t):
        if self.fixed is not None:
            return t * self.fixed[site].to(t.dtype)
        self.masks[site] = (t > 0).detach()
        return torch.relu(t)


class Residual(nn.Module):
    def __init__(self, cin, cout, stride, projection):
        super().__init__()
        self.site = ""
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv3 = nn.Conv2d(cin, cout, 1, stride=stride) if projection else None

    def forward(self, x, relu):
        y = relu(self.site + ".bn1", self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return relu(self.site, y + (self.conv3(x) if self.conv3 is not None else x))


class ResNet18(nn.Module):
    def __init__(self, width=64, classes=10):
        super().__init__()
        self.stem = nn.ModuleDict({"conv": nn.Conv2d(1, width, 3, padding=1),
                                   "bn": nn.BatchNorm2d(width)})
        cin = width
        for stage in range(4):
            cout = width << stage
            first = stage == 0
            blocks = [Residual(cin, cout, 1 if first else 2, not first), Residual(cout, cout, 1, False)]
            for i, block in enumerate(blocks):
                block.site = f"stage{stage + 1}.{i}"
            setattr(self, f"stage{stage + 1}", nn.ModuleList(blocks))
            cin = cout
        self.fc = nn.Linear(cin, classes)

    def forward(self, x, relu=plain_relu):
        x = relu("stem.bn", self.stem["bn"](self.stem["conv"](x)))
        for stage in range(4):
            for block in getattr(self, f"stage{stage + 1}"):
                x = block(x, relu)
        return self.fc(torch.flatten(x.mean(dim=(2, 3)), 1))


def step(arrays, dtype, lr, momentum, weight_decay, directory, prefix, relu):
    """One training step in `dtype` with the ReLUs `relu`; writes <prefix>.loss, .grad.*,
    .state.*, .sgd.*."""
    width = arrays["stem.conv.weight"].shape[0]
    model = ResNet18(width).to(dtype)
    state = model.state_dict()
    for name in state:
        if name.endswith("num_batches_tracked"):
            continue
        if name not in arrays:
            sys.exit(f"torch_resnet18.py: spmd wrote no tensor for {name}")
        if tuple(arrays[name].shape) != tuple(state[name].shape):
            sys.exit(f"torch_resnet18.py: {name} is {tuple(arrays[name].shape)} in spmd, "
                     f"{tuple(state[name].shape)} here")
        state[name].copy_(arrays[name].to(dtype))
    model.train()
    logits = model(arrays["input.x"].to(dtype), relu)
    loss = nn.functional.cross_entropy(logits, arrays["input.y"].long())
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum,
                                weight_decay=weight_decay)
    optimizer.zero_grad()
    loss.backward()
    write(directory, prefix + ".loss", loss.reshape(()))
    for name, p in model.named_parameters():
        write(directory, prefix + ".grad." + name, p.grad)
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            write(directory, prefix + ".state." + name, b)
    optimizer.step()
    for name, p in model.named_parameters():
        write(directory, prefix + ".sgd." + name, p)


def main():
    directory, lr, momentum, weight_decay = sys.argv[1], *map(float, sys.argv[2:5])
    arrays = read(directory)
    # The step in float32 (as spmd's f32 path runs it) and in float64 (the precise reference),
    # then in float64 with the ReLU masks of PyTorch's f32 step and of spmd's.
    relu32, relu64 = Relu(), Relu()
    step(arrays, torch.float32, lr, momentum, weight_decay, directory, "torch32", relu32)
    step(arrays, torch.float64, lr, momentum, weight_decay, directory, "torch64", relu64)
    masks = {"m32": relu32.masks}
    if all("act." + site in arrays for site in relu32.masks):
        masks["mspmd"] = {site: arrays["act." + site] > 0 for site in relu32.masks}
    for name, fixed in masks.items():
        step(arrays, torch.float64, lr, momentum, weight_decay, directory, "torch64_" + name,
             Relu(fixed))
        flips = sum(int((fixed[site] != relu64.masks[site]).sum()) for site in fixed)
        write(directory, "torch.flips_" + name, torch.tensor([flips], dtype=torch.float64))
    # This module's own count of parameters and parameter tensors, for spmd's to be checked by.
    model = ResNet18(arrays["stem.conv.weight"].shape[0])
    counts = [sum(p.numel() for p in model.parameters()), len(list(model.parameters()))]
    write(directory, "torch.parameter_counts", torch.tensor(counts, dtype=torch.float64))


if __name__ == "__main__":
    main()
