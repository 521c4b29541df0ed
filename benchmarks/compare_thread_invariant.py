#!/usr/bin/env python3
"""What thread-invariant kernels cost (SPMD_THREAD_INVARIANT=1, README "Which kernels run"): the
full-width ResNet-18 training step (batch 64) and the width-16 pmap step on cpu:1, 2 and 4, each
timed with the default kernels and with thread-invariant ones, in alternating rounds in one run;
prints both medians and the ratio (invariant / default time) per case and round.

usage: python3 benchmarks/compare_thread_invariant.py [--build build] [--rounds 3] [--reps 3]
       [--smoke]   (a tiny case, one round of one repetition: CI runs it so the script cannot rot)"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import time_spmd  # noqa: E402

CASES = [("full-width train step, batch 64", "bench_resnet18_train_step",
          "BM_ResNet18TrainStep/batch:64/plan:1/fuse:1/layouts:1/")] + [
    (f"width-16 pmap step, cpu:{d}", "bench_resnet18_pmap_step", f"BM_ResNet18PmapStep/devices:{d}/batch:64/width:16/")
    for d in (1, 2, 4)]
# One tiny case: enough that a renamed benchmark or flag fails CI (the cases above are the same
# programs at full size).
SMOKE = [("width-2 pmap step, cpu:2", "bench_resnet18_pmap_step", "BM_ResNet18PmapStep/devices:2/batch:4/width:2/")]


def timed(args, program, name, invariant):
    os.environ["SPMD_THREAD_INVARIANT"] = "1" if invariant else "0"
    return time_spmd(args.build, name, args.reps, args.threads, program, min_time=0.01 if args.smoke else 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="OMP_NUM_THREADS of the process")
    parser.add_argument("--smoke", action="store_true", help="a tiny case, one round of one repetition")
    args = parser.parse_args()
    cases = SMOKE if args.smoke else CASES
    if args.smoke:
        args.rounds, args.reps = 1, 1
    print(f"threads {args.threads}; ratio = thread-invariant time / default time (1.05 = 5% slower)")
    for title, program, name in cases:
        ratios = []
        for r in range(args.rounds):
            default = timed(args, program, name, False)
            invariant = timed(args, program, name, True)
            ratios.append(invariant / default)
            print(f"{title}, round {r + 1}: default {default:.2f} ms, thread-invariant {invariant:.2f} ms, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
        print(f"{title}: median ratio {sorted(ratios)[len(ratios) // 2]:.3f}", flush=True)


if __name__ == "__main__":
    main()
