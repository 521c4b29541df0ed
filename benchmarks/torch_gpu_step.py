#!/usr/bin/env python3
"""PyTorch's side of the GPU report: the seeds' ResNet-18 training step (1x28x28, train-mode BN,
softmax cross-entropy, backward, SGD with momentum 0.9) at the global batches bench_gpu_step
times (64, 256, 1024), eager and replayed from a CUDA graph (torch.cuda.graphs, the counterpart
of spmd's graphs), in four modes:
  fastest        f32, TF32 off (as spmd runs f32 unless SPMD_ALLOW_TF32=1), cudnn.benchmark on
  deterministic  the same with torch.use_deterministic_algorithms(True) and cudnn.benchmark off:
                 only kernels whose bits repeat, as spmd promises
  channels-last  fastest with the model and the batch in channels_last (NHWC)
  bf16           fastest under torch.autocast(bfloat16) (bf16 convolutions and matmuls)
Prints one line per mode and batch with the median milliseconds a step and the share of the
device's peak it reaches (the step is 2.735 GFLOP an image; --peak-f32 / --peak-bf16, TFLOP/s,
default an H100 SXM's dense 66.9 / 989.4); the GPU report puts them beside spmd's.

usage: python3 benchmarks/torch_gpu_step.py [--device cuda] [--batches 64,256,1024] [--reps 20]
       [--modes fastest,deterministic,channels-last,bf16] [--peak-f32 T] [--peak-bf16 T]
       [--smoke]   (the CPU, batch 2, one repetition, eager only: CI runs it so it cannot rot)"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms, torch_resnet18  # noqa: E402


MODES = ("fastest", "deterministic", "channels-last", "bf16")
GFLOP_PER_IMAGE = 2.735  # forward and backward of the step (README's GPU table)


def set_mode(torch, mode):
    """The global switches of `mode` (each call sets every one, so modes do not leak)."""
    torch.use_deterministic_algorithms(mode == "deterministic")
    torch.backends.cudnn.deterministic = mode == "deterministic"
    torch.backends.cudnn.benchmark = mode != "deterministic"  # what a user tuning for speed sets


def time_step(torch, device, batch, reps, graphed, mode):
    set_mode(torch, mode)
    torch.manual_seed(0)
    model = torch_resnet18().to(device).train()
    x = torch.randn(batch, 1, 28, 28, device=device)
    if mode == "channels-last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    y = (torch.arange(batch) % 10).to(device)
    autocast_device = "cuda" if device.startswith("cuda") else "cpu"

    def eager():
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast(autocast_device, dtype=torch.bfloat16, enabled=mode == "bf16"):
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
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--peak-f32", type=float, default=66.9, help="the device's dense f32 TFLOP/s")
    parser.add_argument("--peak-bf16", type=float, default=989.4, help="the device's dense bf16 TFLOP/s")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown mode {', '.join(unknown) or '(none given)'}; the modes are {', '.join(MODES)}")
    if args.peak_f32 <= 0 or args.peak_bf16 <= 0:
        parser.error("--peak-f32 and --peak-bf16 must be positive TFLOP/s")
    # cuBLAS repeats its bits only with a fixed workspace configuration (PyTorch's error says so);
    # set before CUDA starts, so for every mode of this run when the deterministic one is asked for.
    if "deterministic" in modes:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    if args.smoke:
        args.device, args.batches, args.reps = "cpu", "2", 1
    if args.device != "cpu" and not torch.cuda.is_available():
        sys.exit("torch_gpu_step: PyTorch sees no GPU; use --device cpu (or --smoke)")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    name = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"# PyTorch {torch.__version__} on {name}, TF32 off; % of peak: {args.peak_f32} TFLOP/s f32, "
          f"{args.peak_bf16} bf16 ({GFLOP_PER_IMAGE} GFLOP an image)")
    for mode in modes:
        peak = args.peak_bf16 if mode == "bf16" else args.peak_f32
        for batch in (int(b) for b in args.batches.split(",")):
            def shown(ms):
                return f"{ms:.3f} ms ({100 * GFLOP_PER_IMAGE * batch / (ms * 1e-3) / (peak * 1e3):.1f}% of peak)"
            eager = time_step(torch, args.device, batch, args.reps, graphed=False, mode=mode)
            line = f"torch batch:{batch}/width:64 {mode} eager {shown(eager)}"
            if args.device != "cpu":
                graphed = time_step(torch, args.device, batch, args.reps, graphed=True, mode=mode)
                line += f", graphed {shown(graphed)}"
            print(line, flush=True)
    set_mode(torch, "fastest")


if __name__ == "__main__":
    main()
