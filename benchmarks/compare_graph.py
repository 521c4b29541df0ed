#!/usr/bin/env python3
"""Training step of a message-passing graph layer (GraphSAGE-style: messages relu(h W1) gathered at
each edge's source, summed and max-folded into its destination, relu(sum + max + h W2) W3 to 8
logits, mean cross-entropy, plain SGD; 10 in-edges a node, width 64) on the CPU: spmd's Google
Benchmark (bench_graph_train_step: take, segmentSum, segmentMax) and the same step in PyTorch
(index_select, index_add, scatter_reduce "amax"; python3-torch, the same threads) in one run;
prints both times and the ratio. --batch is the graph's nodes in hundreds.

usage: /usr/bin/python3 benchmarks/compare_graph.py [--build build] [--batch 64] [--reps 5] [--rounds 1]
       [--smoke]   (200 nodes, one repetition: CI runs it so the script cannot rot)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, side_by_side  # noqa: E402

DEGREE, DIM, CLASSES = 10, 64, 8


def time_torch(batch, reps, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nodes = batch * 100
    edges = nodes * DEGREE
    w1 = (0.1 * torch.randn(DIM, DIM)).requires_grad_()
    w2 = (0.1 * torch.randn(DIM, DIM)).requires_grad_()
    w3 = (0.1 * torch.randn(DIM, CLASSES)).requires_grad_()
    sgd = torch.optim.SGD([w1, w2, w3], lr=0.1)
    h = torch.randn(nodes, DIM)
    i = torch.arange(edges)
    src, dst = i * 7919 % nodes, i % nodes
    labels = torch.arange(nodes) % CLASSES
    at = dst.reshape(-1, 1).expand(edges, DIM)

    def step():
        sgd.zero_grad()
        messages = torch.relu(h @ w1).index_select(0, src)
        summed = torch.zeros(nodes, DIM).index_add(0, dst, messages)
        top = torch.full((nodes, DIM), float("-inf")).scatter_reduce(0, at, messages, "amax")
        out = torch.relu(summed + top + h @ w2)
        loss = torch.nn.functional.cross_entropy(out @ w3, labels)
        loss.backward()
        sgd.step()
        return loss

    return median_ms(step, reps), torch.get_num_threads(), torch.__version__


def main():
    side_by_side(__doc__, "graph layer training step, sum and max aggregation, 10 in-edges a node, width 64",
                 "bench_graph_train_step", lambda batch: f"BM_GraphLayerTrainStep/nodes:{batch * 100}/", time_torch,
                 unit="x100 nodes")


if __name__ == "__main__":
    main()
