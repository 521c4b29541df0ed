#!/usr/bin/env python3
"""Training step of an embedding-bag text classifier (vocab 32000, dim 128, 64 tokens, 4 classes,
dense table gradient, plain SGD) on the CPU: spmd's Google Benchmark (bench_embedding_train_step)
and the same step in PyTorch (nn.Embedding, mean, nn.Linear, cross_entropy, SGD; python3-torch,
the same threads) in one run; prints both times and the ratio. Most of the step is the
embedding's backward, which writes the whole vocab x dim gradient.

usage: /usr/bin/python3 benchmarks/compare_embedding.py [--build build] [--batch 64] [--reps 5] [--rounds 1]
       [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, side_by_side  # noqa: E402

VOCAB, DIM, TOKENS, CLASSES = 32000, 128, 64, 4


def time_torch(batch, reps, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    table = torch.nn.Embedding(VOCAB, DIM)
    head = torch.nn.Linear(DIM, CLASSES)
    params = list(table.parameters()) + list(head.parameters())
    sgd = torch.optim.SGD(params, lr=0.1)
    ids = (torch.arange(batch * TOKENS) * 7919 % VOCAB).reshape(batch, TOKENS)
    labels = torch.arange(batch) % CLASSES

    def step():
        sgd.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(table(ids).mean(1)), labels)
        loss.backward()
        sgd.step()
        return loss

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "embedding-bag classifier training step, vocab 32000, dim 128, 64 tokens",
                 "bench_embedding_train_step",
                 lambda batch: f"BM_EmbeddingBagTrainStep/batch:{batch}/vocab:{VOCAB}/dim:{DIM}/", time_torch,
                 unit="seq")


if __name__ == "__main__":
    main()
