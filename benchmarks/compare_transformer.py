#!/usr/bin/env python3
"""Language-model training step of one decoder block (vocab 4096, dim 256, MLP 1024, 4 heads,
128 tokens: embedding, pre-norm causal self-attention, GELU MLP, final layer norm, linear head,
next-token cross-entropy, plain SGD) on the CPU: spmd's Google Benchmark
(bench_transformer_train_step) and the same block in PyTorch (tests/reference/torch_transformer.py's,
python3-torch, the same threads) in one run; prints both times and the ratio.

usage: /usr/bin/python3 benchmarks/compare_transformer.py [--build build] [--batch 16] [--reps 5] [--rounds 1]
       [--dtype f32|bf16] [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)
--dtype bf16: mixed precision, spmd's block with compute = bf16 (its products in bf16) beside the
PyTorch block's forward and loss under torch.autocast("cpu", bfloat16), the backward and SGD
outside it, as PyTorch's recipe has it."""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from compare_resnet18_forward import median_ms, side_by_side  # noqa: E402

VOCAB, DIM, HIDDEN, HEADS, TOKENS = 4096, 256, 1024, 4, 128


def time_torch(batch, reps, threads, dtype="f32"):
    import torch
    from torch_transformer import block
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shapes = {"embed.weight": (VOCAB, DIM)}
    for ln in ("ln1", "ln2", "lnf"):
        shapes[ln + ".weight"], shapes[ln + ".bias"] = (DIM,), (DIM,)
    for name, out, inp in (("q", DIM, DIM), ("k", DIM, DIM), ("v", DIM, DIM), ("proj", DIM, DIM),
                           ("fc1", HIDDEN, DIM), ("fc2", DIM, HIDDEN), ("head", VOCAB, DIM)):
        shapes[name + ".weight"], shapes[name + ".bias"] = (out, inp), (out,)
    p = {n: (torch.rand(s) * 2 - 1).mul_(1 / math.sqrt(s[-1]) if len(s) == 2 else 0.1).requires_grad_()
         for n, s in shapes.items()}
    sgd = torch.optim.SGD(list(p.values()), lr=0.01)
    positions = torch.arange(batch * TOKENS)
    ids = (positions * 7919 % VOCAB).reshape(batch, TOKENS)
    targets = ((positions + 1) * 7919 % VOCAB).reshape(-1)

    def step():
        sgd.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = block(p, ids, HEADS)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets)
        loss.backward()
        sgd.step()
        return loss

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "decoder block LM training step, vocab 4096, dim 256, 4 heads, 128 tokens",
                 "bench_transformer_train_step", lambda batch: f"BM_TransformerTrainStep/batch:{batch}/", time_torch,
                 unit="seq", batch=16, bf16_name_of=lambda batch: f"BM_TransformerTrainStepBf16/batch:{batch}/")


if __name__ == "__main__":
    main()
