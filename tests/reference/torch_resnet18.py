#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest: the seeds' ResNet-18 (d2l's variant) with the parameters,
BN state and batch that spmd wrote to DIR; writes back, in float32 and in float64, the loss, the
gradient of every parameter, the BN running statistics after the step, the parameters after
one torch.optim.SGD step, and the module's parameter count and number of parameter tensors.

Files in DIR as tests/reference/exchange.py describes. Parameter names follow spmd's (they
match this module's state_dict keys).

usage: torch_resnet18.py DIR LR MOMENTUM WEIGHT_DECAY
"""
import sys

import torch
from torch import nn

from exchange import read, write


class Residual(nn.Module):
    def __init__(self, cin, cout, stride, projection):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv3 = nn.Conv2d(cin, cout, 1, stride=stride) if projection else None

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.conv3(x) if self.conv3 is not None else x))


class ResNet18(nn.Module):
    def __init__(self, width=64, classes=10):
        super().__init__()
        self.stem = nn.ModuleDict({"conv": nn.Conv2d(1, width, 3, padding=1),
                                   "bn": nn.BatchNorm2d(width)})
        cin = width
        for stage in range(4):
            cout = width << stage
            first = stage == 0
            setattr(self, f"stage{stage + 1}", nn.ModuleList(
                [Residual(cin, cout, 1 if first else 2, not first), Residual(cout, cout, 1, False)]))
            cin = cout
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = torch.relu(self.stem["bn"](self.stem["conv"](x)))
        for stage in range(4):
            for block in getattr(self, f"stage{stage + 1}"):
                x = block(x)
        return self.fc(torch.flatten(x.mean(dim=(2, 3)), 1))


def step(arrays, dtype, lr, momentum, weight_decay, directory, prefix):
    """One training step in `dtype`; writes <prefix>.loss, .grad.*, .state.*, .sgd.*."""
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
    logits = model(arrays["input.x"].to(dtype))
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
    # The step in float32 (as spmd's f32 path runs it) and in float64 (the precise reference).
    step(arrays, torch.float32, lr, momentum, weight_decay, directory, "torch32")
    step(arrays, torch.float64, lr, momentum, weight_decay, directory, "torch64")
    # This module's own count of parameters and parameter tensors, for spmd's to be checked by.
    model = ResNet18(arrays["stem.conv.weight"].shape[0])
    counts = [sum(p.numel() for p in model.parameters()), len(list(model.parameters()))]
    write(directory, "torch.parameter_counts", torch.tensor(counts, dtype=torch.float64))


if __name__ == "__main__":
    main()
