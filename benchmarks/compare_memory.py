#!/usr/bin/env python3
"""What fits: per-replica memory and step time of ResNet-18 trained replicated, with ZeRO-1
(--shard-update), FSDP (--fsdp) and FSDP with every residual block recomputed (--fsdp --remat),
at N = 1, 2 and 4 replicas (cpu:N), at full width and at a wider configuration, from
benchmarks/dist_bench's step mode:

  planned  the bytes one replica's memory plan holds during a step (arena + inputs + other
           buffers: runtime::residentBytes), from the compiler, not a measurement;
  rss      the process's peak resident memory (all N replicas and the runtime), measured;
  step     the median step time.

Then, for each way, the largest width (a multiple of 16) whose plan fits --limit-mb per replica
at N = 4 (found by bisection, compiling and running one step per probe). PyTorch FSDP (gloo) is
tried beside it where it runs on this machine; the line says why when it does not.

--smoke runs tiny sizes once (CI runs it so the script cannot rot).
"""
import argparse
import os
import subprocess
import sys

MODES = [("replicated", []), ("ZeRO-1", ["--shard-update"]), ("FSDP", ["--fsdp"]),
         ("FSDP + remat", ["--fsdp", "--remat"])]


def step(bench, devices, width, batch, steps, flags, timeout):
    command = [bench, "step", "--devices", devices, "--width", str(width), "--batch", str(batch),
               "--steps", str(steps)] + flags
    env = dict(os.environ, SPMD_KERNEL_TIMING=os.environ.get("SPMD_KERNEL_TIMING", "0"))
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.exit("%s exited %d:\n%s" % (" ".join(command), p.returncode, p.stdout))
    for line in p.stdout.splitlines():
        if line.startswith("result step "):
            return dict(kv.split("=", 1) for kv in line.split()[2:])
    sys.exit("no result line from %s:\n%s" % (" ".join(command), p.stdout))


def torch_fsdp_status():
    """Whether PyTorch's FSDP can be imported here (its CPU + gloo run needs that first)."""
    probe = ("import torch\n"
             "from torch.distributed.fsdp import FullyShardedDataParallel\n"
             "print(torch.__version__)\n")
    p = subprocess.run(["/usr/bin/python3", "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "no output"
    return p.returncode == 0, last


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/benchmarks/dist_bench")
    parser.add_argument("--widths", default="64,128", help="model widths for the table")
    parser.add_argument("--devices", default="1,2,4", help="replica counts for the table")
    parser.add_argument("--batch", type=int, default=64, help="global batch")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--limit-mb", type=float, default=400.0, help="per-replica plan limit for the width search")
    parser.add_argument("--max-width", type=int, default=512)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.widths, args.devices, args.batch, args.steps, args.limit_mb, args.max_width = "4", "1,2", 8, 1, 2.0, 8
    timeout = 300 if args.smoke else 1800
    widths = [int(w) for w in args.widths.split(",")]
    counts = [int(n) for n in args.devices.split(",")]

    print("ResNet-18 on 1x28x28, global batch %d, SGD with momentum (dist_bench step)" % args.batch)
    print("%-6s %-3s %-13s %12s %10s %9s" % ("width", "N", "way", "planned MB", "rss MB", "step ms"))
    for width in widths:
        for n in counts:
            base = None
            for name, flags in MODES:
                if n == 1 and name != "replicated" and name != "FSDP + remat":
                    continue  # one replica: nothing to shard
                r = step(args.bench, "cpu:%d" % n, width, args.batch, args.steps,
                         flags if n > 1 else [f for f in flags if f == "--remat"], timeout)
                planned = float(r["planned_mb_per_replica"])
                base = base or planned
                print("%-6d %-3d %-13s %12.1f %10.1f %9.1f   (%.2fx the replicated plan)" %
                      (width, n, name if n > 1 or name == "replicated" else "remat", planned, float(r["rss_mb"]),
                       float(r["median_ms"]), planned / base))

    n = max(counts)
    unit = 4 if args.smoke else 16
    print("largest width (multiple of %d) whose plan fits %.0f MB per replica at cpu:%d, batch %d:" %
          (unit, args.limit_mb, n, args.batch))
    for name, flags in MODES:
        def fits(width):
            return float(step(args.bench, "cpu:%d" % n, width, args.batch, 1, flags, timeout)
                         ["planned_mb_per_replica"]) <= args.limit_mb
        lo, hi = 0, args.max_width // unit + 1  # in units: lo fits (0: nothing), hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid * unit):
                lo = mid
            else:
                hi = mid
        best = lo * unit
        print("  %-13s %s" % (name, ("width %d" % best) if best else "none of the widths tried"))

    ok, detail = torch_fsdp_status()
    if ok:
        print("PyTorch FSDP (gloo): importable (torch %s); its CPU run is not wired into this script yet" % detail)
    else:
        print("PyTorch FSDP (gloo): does not run on this machine's PyTorch: %s" % detail)


if __name__ == "__main__":
    main()
