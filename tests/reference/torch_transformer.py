#!/usr/bin/env python3
"""PyTorch side of TorchReferenceTest's transformer block: token embedding, pre-norm causal
self-attention (2 heads) and GELU MLP with residuals, a final layer norm and a linear head, mean
cross-entropy against next tokens. Reads the parameters and batch spmd wrote to DIR; writes back,
in float32 and in float64, the loss and the gradient of every parameter, and the same of the
float32 step under torch.autocast("cpu", bfloat16) ("torchbf16": bf16 linear layers and batched
products, f32 parameters, gradients and loss). Files in DIR as
tests/reference/exchange.py describes; names as spmd's (TorchReferenceTest.cpp).

usage: torch_transformer.py DIR HEADS
"""
import math
import sys

import torch
from torch.nn import functional as F

from exchange import read, write


def block(p, ids, heads):
    x = F.embedding(ids, p["embed.weight"])
    b, t, d = x.shape
    mask = torch.triu(torch.full((t, t), -1e9, dtype=x.dtype), diagonal=1)

    def split(h):  # [B, T, D] -> [B * heads, T, D / heads]
        return h.reshape(b, t, heads, d // heads).transpose(1, 2).reshape(b * heads, t, d // heads)

    h = F.layer_norm(x, (d,), p["ln1.weight"], p["ln1.bias"], eps=1e-5)
    q, k, v = (split(F.linear(h, p[n + ".weight"], p[n + ".bias"])) for n in ("q", "k", "v"))
    scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(d // heads)) + mask
    attended = torch.bmm(torch.softmax(scores, dim=-1), v)
    attended = attended.reshape(b, heads, t, d // heads).transpose(1, 2).reshape(b, t, d)
    x = x + F.linear(attended, p["proj.weight"], p["proj.bias"])
    h = F.layer_norm(x, (d,), p["ln2.weight"], p["ln2.bias"], eps=1e-5)
    x = x + F.linear(F.gelu(F.linear(h, p["fc1.weight"], p["fc1.bias"])), p["fc2.weight"], p["fc2.bias"])
    h = F.layer_norm(x, (d,), p["lnf.weight"], p["lnf.bias"], eps=1e-5)
    return F.linear(h, p["head.weight"], p["head.bias"])


def step(arrays, dtype, heads, directory, prefix, autocast=False):
    p = {name: a.to(dtype).clone().requires_grad_() for name, a in arrays.items() if not name.startswith("input.")}
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = block(p, arrays["input.ids"].long(), heads)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), arrays["input.targets"].long().reshape(-1))
    loss.backward()
    write(directory, prefix + ".loss", loss.reshape(()))
    for name, value in p.items():
        write(directory, prefix + ".grad." + name, value.grad)


def main():
    directory, heads = sys.argv[1], int(sys.argv[2])
    arrays = read(directory)
    step(arrays, torch.float32, heads, directory, "torch32")
    step(arrays, torch.float64, heads, directory, "torch64")
    step(arrays, torch.float32, heads, directory, "torchbf16", autocast=True)


if __name__ == "__main__":
    main()
