#!/usr/bin/env python3
"""ResNet-18 forward (batch 64, 1x28x28, train-mode BN) on the CPU: spmd's Google Benchmark and
PyTorch (python3-torch, the same model and threads) in one run; prints both times and the ratio.

usage: python3 benchmarks/compare_resnet18_forward.py [--build build] [--batch 64] [--reps 10] [--rounds 1]
       [--smoke]   (batch 2, one repetition: CI runs it so the script cannot rot)
Run with Debian's /usr/bin/python3 (where python3-torch lives)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


def torch_resnet18():
    """The seeds' ResNet-18 in PyTorch (tests/reference/torch_resnet18.py, shared with the tests)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
    from torch_resnet18 import ResNet18
    return ResNet18()


def median_ms(fn, reps, warmup=2):
    """Median wall time of `reps` calls of fn, in ms, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(reps, 1)):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def time_torch(batch, reps, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_resnet18().train()
    x = torch.randn(batch, 1, 28, 28)
    with torch.no_grad():
        ms = median_ms(lambda: model(x), reps)
    return ms, torch.get_num_threads(), torch.__version__


def time_spmd(build, name, reps, threads, program, min_time=0.5, binary=None):
    """Median real time (ms) of the Google Benchmark whose full name starts with `name` (e.g.
    "BM_ResNet18Forward/batch:64/layouts:1/") in `program` (`binary`, else the build's); exits
    naming the registered ones when none matches."""
    binary = binary or os.path.join(build, "benchmarks", program)
    if not os.path.exists(binary):
        sys.exit(f"missing {binary}: build first (bash scripts/build.sh)")
    listed = subprocess.run([binary, "--benchmark_list_tests"], check=True, capture_output=True, text=True)
    if not any(line.startswith(name) for line in listed.stdout.splitlines()):
        sys.exit(f"{program} has no benchmark '{name}'; registered:\n{listed.stdout}")
    out = subprocess.run([binary, "--benchmark_filter=^" + re.escape(name),
                          f"--benchmark_repetitions={max(reps, 1)}", "--benchmark_format=json",
                          "--benchmark_report_aggregates_only=false", f"--benchmark_min_time={min_time}"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    runs = [b for b in json.loads(out.stdout)["benchmarks"] if b["name"].startswith(name)]
    medians = [b for b in runs if b.get("aggregate_name") == "median"]
    return (medians or runs)[0]["real_time"]


def side_by_side(doc, title, program, name_of, torch_timer, f64_name_of=None, unit="img", batch=64,
                 bf16_name_of=None):
    """Parses the shared flags, times spmd's benchmark `name_of(batch)` in `program` and
    `torch_timer` with the same batch and threads, and prints both with their ratio and the
    throughput in `unit`s (a batch's samples) per second; `batch` is --batch's default. With
    `f64_name_of` (`bf16_name_of`), --dtype f64 (bf16) times that benchmark and passes dtype="f64"
    ("bf16") to `torch_timer`."""
    names = {"f32": name_of}
    if f64_name_of:
        names["f64"] = f64_name_of
    if bf16_name_of:
        names["bf16"] = bf16_name_of
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--bench", help=f"the {program} to run (default: the one in --build)")
    parser.add_argument("--batch", type=int, help=f"default {batch}" + (" (8 in f64)" if "f64" in names else ""))
    if len(names) > 1:
        meaning = {"f64": "f64: both sides in double precision (a gradient check's or reference run's)",
                   "bf16": "bf16: mixed precision, spmd's compute = bf16 beside torch.autocast"}
        parser.add_argument("--dtype", choices=list(names), default="f32",
                            help="; ".join(meaning[d] for d in names if d in meaning))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="threads for both sides (OMP_NUM_THREADS / torch.set_num_threads)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the two sides this many times and print the median ratio: on a "
                             "shared VM whose speed changes for seconds at a time (2x on one seen here), "
                             "one round can fall on one side's slow spell")
    parser.add_argument("--smoke", action="store_true", help="batch 2, one repetition: checks that it runs")
    args = parser.parse_args()
    dtype = getattr(args, "dtype", "f32")
    f64 = dtype == "f64"
    if args.batch is None:
        args.batch = 8 if f64 else batch
    if args.smoke:
        args.batch, args.reps, args.rounds = 2, 1, 1
    if args.rounds < 1:
        sys.exit(f"--rounds must be at least 1, got {args.rounds}")
    print(f"{title}{'' if dtype == 'f32' else ', ' + dtype}, batch {args.batch}, CPU ({os.cpu_count()} cores)")
    ratios = []
    for round_ in range(args.rounds):
        ours = time_spmd(args.build, names[dtype](args.batch), args.reps, args.threads, program,
                         min_time=0.01 if args.smoke else 0.5, binary=args.bench)
        reps = 1 if args.smoke else max(args.reps * 2, 10)
        theirs, threads, version = (torch_timer(args.batch, reps, args.threads, dtype=dtype) if dtype != "f32"
                                    else torch_timer(args.batch, reps, args.threads))
        ratios.append(ours / theirs)
        if args.rounds > 1:
            print(f"  round {round_ + 1} of {args.rounds}:")
        print(f"  spmd (cpu:0, {args.threads} threads)    : {ours:8.2f} ms/step  {args.batch / ours * 1e3:8.1f} {unit}/s")
        print(f"  PyTorch {version} ({threads} threads): {theirs:8.2f} ms/step  {args.batch / theirs * 1e3:8.1f} {unit}/s")
        print(f"  ratio spmd/PyTorch time    : {ours / theirs:8.3f}  (< 1 means spmd is faster)")
    if args.rounds > 1:
        listed = " ".join(f"{r:.3f}" for r in ratios)
        print(f"ratios {listed}: median {statistics.median(ratios):.3f} over {args.rounds} rounds")


def main():
    side_by_side(__doc__, "ResNet-18 forward, 1x28x28, train-mode BN", "bench_resnet18_forward",
                 lambda batch: f"BM_ResNet18Forward/batch:{batch}/layouts:1/", time_torch)

if __name__ == "__main__":
    main()
