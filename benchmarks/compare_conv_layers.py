#!/usr/bin/env python3
"""Per-layer table: each convolution shape of the full-width ResNet-18 training step (batch 64,
1x28x28), forward / backward-data / backward-filter, spmd's CPU kernels (build/benchmarks/
bench_conv_layers) beside the same primitive in PyTorch (python3-torch, the same threads), in one
run. Shows where the remaining gap to PyTorch is; "x" columns are spmd/PyTorch time ratios
(< 1: spmd faster); the last line weights each shape by its uses per step. A second table gives
spmd's GFLOP/s per kernel (a direct convolution's FLOPs, so Winograd counts as more than the
arithmetic it does) and its share of this machine's f32 peak, measured by an FMA loop in
bench_conv_layers on the same threads.

usage: /usr/bin/python3 benchmarks/compare_conv_layers.py [--build build] [--batch 64] [--reps 10]
       [--threads N] [--smoke]   (--smoke: batch 2, width 4, one repetition; CI runs it)"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import median_ms  # noqa: E402


def spmd_rows(build, batch, width, reps, threads):
    binary = os.path.join(build, "benchmarks", "bench_conv_layers")
    if not os.path.exists(binary):
        sys.exit(f"missing {binary}: build first (bash scripts/build.sh)")
    out = subprocess.run([binary, "--batch", str(batch), "--width", str(width), "--reps", str(reps)],
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if out.returncode != 0:
        sys.exit(f"{binary} failed:\n{out.stderr}")
    rows = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in out.stdout.splitlines()
            if line.startswith("result ")]
    peaks = [r for r in rows if "peak_gflops" in r]
    layers = [r for r in rows if "layer" in r]
    if not peaks or not layers:
        sys.exit(f"no 'result peak' and 'result layer' lines from {binary}:\n{out.stdout}")
    return peaks[0], layers


def torch_times(row, batch, reps):
    """Median ms of PyTorch's conv forward, input gradient and weight gradient on the row's shape."""
    import torch
    cin, cout, size, k, s = (int(row[n]) for n in ("in", "out", "size", "kernel", "stride"))
    pad = k // 2
    torch.manual_seed(0)
    x = torch.randn(batch, cin, size, size)
    w = torch.randn(cout, cin, k, k)
    b = torch.randn(cout)
    y = torch.nn.functional.conv2d(x, w, b, s, pad)
    dy = torch.randn_like(y)

    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, [s, s], [pad, pad], [1, 1], False,
                                                           [0, 0], 1, mask)
    with torch.no_grad():
        return (median_ms(lambda: torch.nn.functional.conv2d(x, w, b, s, pad), reps),
                median_ms(backward([True, False, False]), reps), median_ms(backward([False, True, False]), reps))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.batch, args.width, args.reps = 2, 4, 1
    import torch
    torch.set_num_threads(args.threads)
    peak, rows = spmd_rows(args.build, args.batch, args.width, args.reps, args.threads)
    print(f"ResNet-18 width {args.width} convolutions, batch {args.batch}, {args.threads} threads, "
          f"PyTorch {torch.__version__} (ms per call; x = spmd/PyTorch)")
    header = f"  {'layer':16} {'n':>2} | {'fwd':>7} {'torch':>7} {'x':>5} | {'bwd data':>8} {'torch':>7} {'x':>5} | " \
             f"{'bwd filt':>8} {'torch':>7} {'x':>5}"
    print(header)
    ours_total, theirs_total = [0.0] * 3, [0.0] * 3
    for row in rows:
        ours = [float(row[k]) for k in ("fwd_ms", "data_ms", "filter_ms")]
        theirs = torch_times(row, args.batch, args.reps)
        n = int(row["count"])
        for i in range(3):
            ours_total[i] += n * ours[i]
            theirs_total[i] += n * theirs[i]
        cells = " | ".join(f"{o:8.2f} {t:7.2f} {o / t:5.2f}" for o, t in zip(ours, theirs))
        print(f"  {row['layer']:16} {n:>2} | {cells}")
    cells = " | ".join(f"{o:8.2f} {t:7.2f} {o / t:5.2f}" for o, t in zip(ours_total, theirs_total))
    print(f"  {'per step':16} {'':>2} | {cells}")
    peak_gflops = float(peak["peak_gflops"])
    print(f"spmd GFLOP/s (direct-convolution FLOPs) and % of the measured f32 peak, {peak_gflops:.1f} GFLOP/s "
          f"({peak['threads']} threads, {peak['isa']} FMA loop):")
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
    print(f"ratio spmd/PyTorch time, all convolutions of a step: {sum(ours_total) / sum(theirs_total):.3f}")


if __name__ == "__main__":
    main()
