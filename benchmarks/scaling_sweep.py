#!/usr/bin/env python3
"""Cost as the work grows: the main job's ResNet-18 training step (width 16 unless --width, SGD
momentum, per-replica BN) swept over global batch (16 .. 512), emulated devices in one process
(cpu:1, cpu:2, cpu:4: a batch must divide over the devices, so cpu:3 is left out) and processes under mpirun on this host (2 and 4, cpu:1 each), beside PyTorch
running the same step on the whole global batch in one process. Every run prints step time,
images/s and peak memory (spmd: the replicas' planned arenas and the processes' peak resident
set, summed over processes; PyTorch: its process's peak resident set).

Writes DIR/scaling.csv (one row per configuration and batch) and draws DIR/scaling.png with
gnuplot (images/s, and peak memory, against global batch). The processes of one run share the
machine's cores: OMP threads = cores / processes.

usage: /usr/bin/python3 benchmarks/scaling_sweep.py [--build build] [--out build/scaling] [--width 16]
       [--steps 5] [--smoke]   (--smoke: width 2, batches 16 and 32, one step; CI runs it)"""
import argparse
import csv
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = """set terminal pngcairo size 1200,500 font ",10"
set output "scaling.png"
set multiplot layout 1,2 title "ResNet-18 training step against global batch (".cpu.")"
set logscale x 2
set xlabel "global batch"
set key left top
set grid
set ylabel "images/s"
plot for [i=2:columns] "images.dat" using 1:i with linespoints title columnheader(i)
set ylabel "peak memory (MB)"
plot for [i=2:memcolumns] "memory.dat" using 1:i with linespoints title columnheader(i)
unset multiplot
"""


def torch_worker(width, batch, steps):
    """PyTorch's step on the whole global batch in this process: median ms and peak RSS."""
    import torch
    from torch import nn
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
    from torch_resnet18 import ResNet18

    torch.manual_seed(1)
    model = ResNet18(width)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    times = []
    for step in range(steps + 1):  # the first step warms up
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        if step > 0:
            times.append(time.perf_counter() - start)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print("result torch median_ms=%.3f rss_mb=%.1f" % (1e3 * statistics.median(times), rss / 1e6), flush=True)


def run(command, env):
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit("%s exited %d:\n%s" % (" ".join(command), p.returncode, p.stdout))
    for line in p.stdout.splitlines():
        if line.startswith("result "):
            return dict(kv.split("=", 1) for kv in line.split()[2:])
    sys.exit("no 'result' line from %s:\n%s" % (" ".join(command), p.stdout))


def measured(config, batch, result):
    """One CSV row from a run's result line."""
    ms = float(result["median_ms"])
    return {"config": config, "batch": batch, "step_ms": ms, "images_per_s": batch / (ms / 1e3),
            "arena_mb": float(result["arena_mb"]), "rss_mb": float(result["rss_mb"])}


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        name = next(l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name"))
        flags = next((l for l in out.splitlines() if l.startswith("Flags")), "")
        return "%s, %d cores, %s" % (name, os.cpu_count() or 1, "AVX-512" if "avx512f" in flags else "AVX2")
    except (OSError, StopIteration):
        return "%d cores" % (os.cpu_count() or 1)


def draw(out, rows, configs):
    """Wide tables for gnuplot (a column per configuration), then the fixed script run in `out`."""
    batches = sorted({r["batch"] for r in rows})
    cell = {(r["config"], r["batch"]): r for r in rows}
    spmd = [c for c in configs if c != "PyTorch"]
    with open(os.path.join(out, "images.dat"), "w") as f:
        f.write("batch " + " ".join('"%s"' % c for c in configs) + "\n")
        for b in batches:
            f.write("%d " % b + " ".join("%.1f" % cell[(c, b)]["images_per_s"] for c in configs) + "\n")
    memory = [("%s RSS" % c, c, "rss_mb") for c in configs] + [("%s arena" % c, c, "arena_mb") for c in spmd[:1]]
    with open(os.path.join(out, "memory.dat"), "w") as f:
        f.write("batch " + " ".join('"%s"' % name for name, _, _ in memory) + "\n")
        for b in batches:
            f.write("%d " % b + " ".join("%.1f" % cell[(c, b)][key] for _, c, key in memory) + "\n")
    with open(os.path.join(out, "scaling.gp"), "w") as f:
        f.write(PLOT)
    # Values reach gnuplot as -e assignments of numbers and a quoted CPU name with quotes removed.
    cpu = cpu_name().replace('"', "").replace("\\", "")
    p = subprocess.run(["gnuplot", "-e", "columns=%d" % (len(configs) + 1), "-e", "memcolumns=%d" % (len(memory) + 1),
                        "-e", 'cpu="%s"' % cpu, "scaling.gp"], cwd=out, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("gnuplot failed:\n" + p.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default=None, help="folder for scaling.csv and scaling.png (default BUILD/scaling)")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--torch-worker", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(*args.torch_worker)
    batches, devices, processes = [16, 32, 64, 128, 256, 512], [1, 2, 4], [2, 4]
    if args.smoke:
        args.width, args.steps, batches, devices, processes = 2, 1, [16, 32], [1, 2], [2]
    if args.width < 1 or args.steps < 1:
        sys.exit("--width and --steps must be positive")
    out = args.out or os.path.join(args.build, "scaling")
    os.makedirs(out, exist_ok=True)
    bench = os.path.join(args.build, "benchmarks", "dist_bench")
    if not os.path.exists(bench):
        sys.exit("missing %s: build first (bash scripts/build.sh)" % bench)
    cores = os.cpu_count() or 1
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", SPMD_OVERLAP="1")
    mpirun = [args.mpirun, "--oversubscribe", "--bind-to", "none", "--timeout", "3600", "--mca", "pml", "ob1",
              "--mca", "btl", "self,vader,tcp", "-x", "OMP_NUM_THREADS", "-x", "SPMD_OVERLAP"]
    rows, configs = [], []
    for batch in batches:
        step = [bench, "step", "--width", str(args.width), "--batch", str(batch), "--steps", str(args.steps)]
        runs = [("cpu:%d" % k, step + ["--devices", "cpu:%d" % k], cores) for k in devices]
        runs += [("%d processes" % p, mpirun + ["-np", str(p)] + step + ["--devices", "cpu:1"], max(1, cores // p))
                 for p in processes]
        for config, command, threads in runs:
            r = run(command, dict(env, OMP_NUM_THREADS=str(threads)))
            rows.append(measured(config, batch, r))
        r = run([sys.executable, os.path.abspath(__file__), "--torch-worker", str(args.width), str(batch),
                 str(args.steps)], dict(env, OMP_NUM_THREADS=str(cores)))
        rows.append(measured("PyTorch", batch, dict(r, arena_mb="0")))
        configs = [c for c, _, _ in runs] + ["PyTorch"]
        print("batch %4d: " % batch + "  ".join("%s %.0f img/s %.0f MB" % (r["config"], r["images_per_s"], r["rss_mb"])
                                               for r in rows if r["batch"] == batch), flush=True)
    with open(os.path.join(out, "scaling.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["config", "batch", "step_ms", "images_per_s", "arena_mb", "rss_mb"])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
    draw(out, rows, configs)
    print("ResNet-18 width %d, %s: wrote %s and %s" % (args.width, cpu_name(), os.path.join(out, "scaling.csv"),
                                                     os.path.join(out, "scaling.png")))


if __name__ == "__main__":
    main()
