#!/usr/bin/env python3
"""PyTorch's side of the GPU report: the seeds' ResNet-18 training step (1x28x28, train-mode BN,
softmax cross-entropy, backward, SGD with momentum 0.9) at the global batches bench_gpu_step
times (64, 256, 1024), in f32 with TF32 off (as spmd runs f32 unless SPMD_ALLOW_TF32=1), eager
and replayed from a CUDA graph (torch.cuda.graphs, the counterpart of spmd's graphs). Prints one
line per batch with the median milliseconds a step; the GPU report puts them beside spmd's.

usage: python3 benchmarks/torch_gpu_step.py [--device cuda] [--batches 64,256,1024] [--reps 20]
       [--smoke]   (the CPU, batch 2, one repetition, eager only: CI runs it so it cannot rot)"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, torch_resnet18  # noqa: E402


def time_step(torch, device, batch, reps, graphed):
    torch.manual_seed(0)
    model = torch_resnet18().to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28, device=device)
    y = (torch.arange(batch) % 10).to(device)

    def eager():
        optimizer.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    if not graphed:
        def step():
            eager()
            if device != "cpu":
                torch.cuda.synchronize()
        return median_ms(step, reps)
    # Warm up on a side stream, then capture one step and replay it (PyTorch's recipe).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager()

    def replay():
        graph.replay()
        torch.cuda.synchronize()
    return median_ms(replay, reps)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", default="64,256,1024")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import torch
    if args.smoke:
        args.device, args.batches, args.reps = "cpu", "2", 1
    if args.device != "cpu" and not torch.cuda.is_available():
        sys.exit("torch_gpu_step: PyTorch sees no GPU; use --device cpu (or --smoke)")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True  # what a user tuning for speed sets
    name = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"# PyTorch {torch.__version__} on {name}, f32, TF32 off, cudnn.benchmark on")
    for batch in (int(b) for b in args.batches.split(",")):
        eager = time_step(torch, args.device, batch, args.reps, graphed=False)
        line = f"torch batch:{batch}/width:64 eager {eager:.3f} ms"
        if args.device != "cpu":
            graphed = time_step(torch, args.device, batch, args.reps, graphed=True)
            line += f", graphed {graphed:.3f} ms"
        print(line, flush=True)


if __name__ == "__main__":
    main()
