#!/usr/bin/env python3
"""Per-layer table: each convolution shape of the full-width ResNet-18 training step (batch 64,
1x28x28), forward / backward-data / backward-filter, spmd's CPU kernels (build/benchmarks/
bench_conv_layers) beside the same primitive in PyTorch (python3-torch, the same threads), in one
run. Shows where the remaining gap to PyTorch is; "x" columns are spmd/PyTorch time ratios
(< 1: spmd faster); the last line weights each shape by its uses per step. A second table gives
spmd's GFLOP/s per kernel (a direct convolution's FLOPs, so Winograd counts as more than the
arithmetic it does) and its share of this machine's f32 peak, measured by an FMA loop in
bench_conv_layers on the same threads.

On a GPU (--device cuda:0) the same table for spmd's cuDNN kernels beside PyTorch's on that GPU,
one table per PyTorch mode (--torch-modes: fastest = cudnn.benchmark on; deterministic =
torch.use_deterministic_algorithms with cudnn.benchmark off, as torch_gpu_step.py), both timed on
the GPU's clock, and the share of --peak-tflops (the device's f32 FMA peak) each reaches.

usage: /usr/bin/python3 benchmarks/compare_conv_layers.py [--build build | --bench BINARY] [--device cpu] [--batch 64]
       [--reps 10] [--threads N] [--torch-modes fastest,deterministic] [--peak-tflops 66.9]
       [--smoke]   (--smoke: batch 2, width 4, one repetition; CI runs it on cpu and on sim)"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms  # noqa: E402
from torch_gpu_step import set_mode  # noqa: E402


def spmd_rows(binary, device, batch, width, reps, threads):
    if not os.path.exists(binary):
        sys.exit(f"missing {binary}: build first (bash scripts/build.sh)")
    out = subprocess.run([binary, "--device", device, "--batch", str(batch), "--width", str(width), "--reps", str(reps)],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if out.returncode != 0:
        sys.exit(f"{binary} failed:\n{out.stderr}")
    rows = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in out.stdout.splitlines()
            if line.startswith("result ")]
    peaks = [r for r in rows if "peak_gflops" in r]
    layers = [r for r in rows if "layer" in r]
    if not layers or (device.startswith("cpu") and not peaks):
        sys.exit(f"no 'result peak' and 'result layer' lines from {binary}:\n{out.stdout}")
    return (peaks[0] if peaks else None), layers


def cuda_median_ms(fn, reps, warmup=2):
    """Median GPU time of `reps` calls of fn, in ms, on the device's clock (CUDA events)."""
    import torch
    for _ in range(warmup):
        fn()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(max(reps, 1) + 1)]
    events[0].record()
    for e in events[1:]:
        fn()
        e.record()
    torch.cuda.synchronize()
    return sorted(a.elapsed_time(b) for a, b in zip(events, events[1:]))[len(events[1:]) // 2]


def torch_times(row, batch, reps, device="cpu"):
    """Median ms of PyTorch's conv forward, input gradient and weight gradient on the row's shape."""
    import torch
    cin, cout, size, k, s = (int(row[n]) for n in ("in", "out", "size", "kernel", "stride"))
    pad = k // 2
    torch.manual_seed(0)
    x = torch.randn(batch, cin, size, size, device=device)
    w = torch.randn(cout, cin, k, k, device=device)
    b = torch.randn(cout, device=device)
    y = torch.nn.functional.conv2d(x, w, b, s, pad)
    dy = torch.randn_like(y)
    timer = cuda_median_ms if device.startswith("cuda") else median_ms

    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [s, s], [pad, pad], [1, 1], False,
                                                           [0, 0], 1, mask)
    with torch.no_grad():
        return (timer(lambda: torch.nn.functional.conv2d(x, w, b, s, pad), reps),
                timer(backward([True, False, False]), reps), timer(backward([False, True, False]), reps))


def print_ratios(rows, batch, reps, torch_device, title):
    ours_total, theirs_total = [0.0] * 3, [0.0] * 3
    print(title)
    print(f"  {'layer':16} {'n':>2} | {'fwd':>7} {'torch':>7} {'x':>5} | {'bwd data':>8} {'torch':>7} {'x':>5} | "
          f"{'bwd filt':>8} {'torch':>7} {'x':>5}")
    for row in rows:
        ours = [float(row[k]) for k in ("fwd_ms", "data_ms", "filter_ms")]
        theirs = torch_times(row, batch, reps, torch_device)
        n = int(row["count"])
        for i in range(3):
            ours_total[i] += n * ours[i]
            theirs_total[i] += n * theirs[i]
        cells = " | ".join(f"{o:8.3f} {t:7.3f} {o / t:5.2f}" for o, t in zip(ours, theirs))
        print(f"  {row['layer']:16} {n:>2} | {cells}")
    cells = " | ".join(f"{o:8.3f} {t:7.3f} {o / t:5.2f}" for o, t in zip(ours_total, theirs_total))
    print(f"  {'per step':16} {'':>2} | {cells}")
    return sum(ours_total) / sum(theirs_total)


def print_variants(rows):
    print("the variant each spmd kernel ran (a cuDNN algorithm's number, gemm: ours, im2col + cuBLAS):")
    print(f"  {'layer':16} | {'fwd':>16} | {'bwd data':>16} | {'bwd filter':>16}")
    for row in rows:
        cells = " | ".join(f"{row.get(k, '-'):>16}" for k in ("fwd_variant", "data_variant", "filter_variant"))
        print(f"  {row['layer']:16} | {cells}")


def print_peak_shares(rows, peak_gflops, what):
    print(f"spmd GFLOP/s (direct-convolution FLOPs) and % of {what}, {peak_gflops:.1f} GFLOP/s:")
    print(f"  {'layer':16} | {'fwd':>7} {'%':>5} | {'bwd data':>8} {'%':>5} | {'bwd filt':>8} {'%':>5}")
    flops_total, ms_total = 0.0, 0.0
    for row in rows:
        flops, n = float(row["flops"]), int(row["count"])
        cells = []
        for key in ("fwd_ms", "data_ms", "filter_ms"):
            gflops = flops / (float(row[key]) * 1e-3) / 1e9
            cells.append(f"{gflops:8.1f} {100 * gflops / peak_gflops:5.1f}")
            flops_total += n * flops
            ms_total += n * float(row[key])
        print(f"  {row['layer']:16} | " + " | ".join(cells))
    step_gflops = flops_total / (ms_total * 1e-3) / 1e9
    print(f"  all convolutions of a step: {step_gflops:.1f} GFLOP/s, {100 * step_gflops / peak_gflops:.1f}% of peak")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--bench", help="bench_conv_layers to run (default: the one in --build)")
    parser.add_argument("--device", default="cpu", help="spmd's device: cpu, sim or cuda:N")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--torch-modes", default="fastest,deterministic",
                        help="PyTorch's modes on a GPU (fastest, deterministic), one table each")
    parser.add_argument("--peak-tflops", type=float, default=66.9, help="the GPU's dense f32 TFLOP/s")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.batch, args.width, args.reps = 2, 4, 1
    gpu = args.device.startswith("cuda")
    modes = args.torch_modes.split(",")
    if gpu and (not modes or any(m not in ("fastest", "deterministic") for m in modes)):
        parser.error(f"--torch-modes takes fastest and/or deterministic, got '{args.torch_modes}'")
    import torch
    torch.set_num_threads(args.threads)
    if gpu and not torch.cuda.is_available():
        sys.exit(f"--device {args.device}: this PyTorch ({torch.__version__}) sees no GPU")
    torch.backends.cudnn.allow_tf32 = False  # f32 as spmd runs it unless SPMD_ALLOW_TF32=1
    binary = args.bench or os.path.join(args.build, "benchmarks", "bench_conv_layers")
    peak, rows = spmd_rows(binary, args.device, args.batch, args.width, args.reps, args.threads)
    # PyTorch beside spmd: on the GPU spmd runs on (cuda:N); the simulator's smoke run beside the CPU's.
    torch_device = args.device if gpu else "cpu"
    where = torch.cuda.get_device_name(torch.device(torch_device)) if gpu else f"{args.threads} threads"
    title = f"ResNet-18 width {args.width} convolutions, batch {args.batch}, spmd on {args.device}, {where}, " \
            f"PyTorch {torch.__version__}"
    ratio = None
    for mode in (modes if gpu else ["cpu"]):
        if gpu:
            set_mode(torch, mode)
        ratio = print_ratios(rows, args.batch, args.reps, torch_device,
                             f"{title}{f' {mode}' if gpu else ''} (ms per call; x = spmd/PyTorch)")
        print(f"ratio spmd/PyTorch{f' {mode}' if gpu else ''} time, all convolutions of a step: {ratio:.3f}")
    print_variants(rows)
    if peak:
        print_peak_shares(rows, float(peak["peak_gflops"]),
                          f"the measured f32 peak ({peak['threads']} threads, {peak['isa']} FMA loop)")
    elif gpu:
        print_peak_shares(rows, args.peak_tflops * 1e3, f"the GPU's f32 peak (--peak-tflops {args.peak_tflops})")


if __name__ == "__main__":
    main()
