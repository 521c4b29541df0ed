#!/usr/bin/env python3
"""Several processes against one, in one run of benchmarks/dist_bench (build/benchmarks/):

1. the sample's ResNet-18 train step at one global batch as 1 process x cpu:2 and as
   2 processes x cpu:1 (mpirun): median step time and their ratio (target <= 1.15);
2. the share of the all-reduce time that ran behind the backward pass, overlap on and off
   (SPMD_OVERLAP=0), 2 processes x cpu:1;
3. all-reduce bus bandwidth, exact and fast modes against a plain MPI_Allreduce in the same
   binary, 4 KB to 64 MB, 2 processes (target: exact >= 0.8x MPI_Allreduce at >= 1 MB);
4. gradient accumulation: the step time per image of cpu:1 --accumulate 2 against cpu:2 at the
   same global batch and one thread per replica, and the drift check's cost (the whole
   replicated state compared across replicas and processes);
5. ZeRO-1 (--shard-update): the optimizer state one replica holds and the step time, sharded
   against replicated, on cpu:2 and as 2 processes x cpu:1;
6. an all-reduce within replica groups over each axis of a mesh {data: 2, model: 4}, a ppermute
   around a ring of every replica and an all_to_all, as 2 processes x 4 replicas: the
   communicator's own paths against the all-gather of every replica's operand they replaced,
   4 KB to 4 MB a replica (speedup = the gather's time / ours).

--smoke runs tiny sizes once (CI runs it so the script cannot rot); it checks that every part
runs and prints its ratio, not the targets.
"""
import argparse
import os
import re
import subprocess
import sys


def parse_result(output, kind):
    rows = []
    for line in output.splitlines():
        if line.startswith("result " + kind):
            rows.append(dict(kv.split("=", 1) for kv in line.split()[2:]))
    if not rows:
        sys.exit("no 'result %s' line in:\n%s" % (kind, output))
    return rows


def run(command, env, timeout):
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("%s exited %d:\n%s" % (" ".join(command), p.returncode, p.stdout))
    return p.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/benchmarks/dist_bench")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.width, args.batch, args.steps = 2, 8, 1
    max_bytes = 65536 if args.smoke else 64 << 20
    repeats = 1 if args.smoke else 10

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mpirun = [args.mpirun, "--oversubscribe", "--bind-to", "none", "--timeout", "1200", "--mca", "pml", "ob1",
              "--mca", "btl", "self,vader,tcp", "-x", "OMP_NUM_THREADS", "-x", "SPMD_OVERLAP"]
    cores = os.cpu_count() or 2
    step = [args.bench, "step", "--width", str(args.width), "--batch", str(args.batch), "--steps", str(args.steps)]

    # 1 process x cpu:2 gets every core; 2 processes x cpu:1 get half each.
    one = parse_result(run(step + ["--devices", "cpu:2"], dict(env, OMP_NUM_THREADS=str(cores), SPMD_OVERLAP="1"), 1800), "step")[0]
    runs = {}
    for overlap in ["1", "0"]:
        e = dict(env, OMP_NUM_THREADS=str(max(1, cores // 2)), SPMD_OVERLAP=overlap)
        runs[overlap] = parse_result(run(mpirun + ["-np", "2"] + step + ["--devices", "cpu:1"], e, 1800), "step")[0]
    two = runs["1"]
    ratio = float(two["median_ms"]) / float(one["median_ms"])
    print("train step, ResNet-18 width %d, global batch %d, %s cores:" % (args.width, args.batch, cores))
    print("  1 process x cpu:2     %9.1f ms" % float(one["median_ms"]))
    print("  2 processes x cpu:1   %9.1f ms   ratio %.3f (target <= 1.15)" % (float(two["median_ms"]), ratio))
    for overlap, label in [("1", "on "), ("0", "off")]:
        r = runs[overlap]
        print("  overlap %s: step %8.1f ms, all-reduce %.1f ms on the communication thread, replicas waited %.1f ms: "
              "%.0f%% hidden" % (label, float(r["median_ms"]), 1e3 * float(r["allreduce_s"]), 1e3 * float(r["waited_s"]),
                                 100 * float(r["hidden"])))

    rows = parse_result(run(mpirun + ["-np", "2", args.bench, "allreduce", "--max-bytes", str(max_bytes), "--repeats",
                                      str(repeats)], dict(env, OMP_NUM_THREADS="1", SPMD_OVERLAP="1"), 1800), "allreduce")
    print("all-reduce, 2 processes, f32 sum (bus bandwidth GB/s; exact/MPI as a ratio of times):")
    print("  %10s %10s %10s %10s %12s" % ("bytes", "MPI", "exact", "fast", "exact vs MPI"))
    for r in rows:
        print("  %10s %10.2f %10.2f %10.2f %12.2f" % (r["bytes"], float(r["mpi_GBps"]), float(r["exact_GBps"]),
                                                   float(r["fast_GBps"]), float(r["exact_vs_mpi"])))
    big = [float(r["exact_vs_mpi"]) for r in rows if int(r["bytes"]) >= 1 << 20]
    if big:
        print("  exact vs MPI at >= 1 MB: worst %.2f (target >= 0.8)" % min(big))

    rows = parse_result(run(mpirun + ["-np", "2", args.bench, "grouped", "--local", "4", "--max-bytes",
                                      str(max_bytes if args.smoke else 4 << 20), "--repeats", str(repeats)],
                            dict(env, OMP_NUM_THREADS="1", SPMD_OVERLAP="1"), 1800), "grouped")
    print("2 processes x 4 replicas: psum within the groups of a mesh {data: 2, model: 4}'s axes, a ring "
          "ppermute, an all_to_all, one within the data groups (ms: ours / through an all-gather = speedup):")
    print("  %10s %22s %22s %22s %22s %22s" % ("bytes", "psum over model", "psum over data", "ppermute ring",
                                             "all_to_all", "all_to_all over data"))
    for r in rows:
        cells = ["%7.3f /%7.3f =%5.1f" % (float(r[k + "_ms"]), float(r[k + "_gather_ms"]), float(r[k + "_speedup"]))
                 for k in ("model", "data", "ring", "a2a", "a2a_data")]
        print("  %10s %22s %22s %22s %22s %22s" % tuple([r["bytes"]] + cells))

    single = dict(env, SPMD_THREADS_PER_REPLICA="1", SPMD_OVERLAP="1")
    two = parse_result(run(step + ["--devices", "cpu:2"], single, 1800), "step")[0]
    acc = parse_result(run(step + ["--devices", "cpu:1", "--accumulate", "2"], single, 1800), "step")[0]
    per_image = lambda r: float(r["median_ms"]) / args.batch
    print("gradient accumulation, global batch %d, 1 thread per replica:" % args.batch)
    print("  cpu:2                 %9.3f ms per image" % per_image(two))
    print("  cpu:1 --accumulate 2  %9.3f ms per image   ratio %.3f" % (per_image(acc), per_image(acc) / per_image(two)))
    print("drift check of the whole replicated state: %.2f ms on cpu:2 (%.2f%% of its step), %.2f ms for "
          "2 processes x cpu:1" % (float(two["drift_check_ms"]), 100 * float(two["drift_check_ms"]) /
                                   float(two["median_ms"]), float(runs["1"]["drift_check_ms"])))

    # ZeRO-1: the optimizer state each replica holds and the step time, sharded against replicated.
    print("sharded update (ZeRO-1, --shard-update), global batch %d:" % args.batch)
    layouts = [("cpu:2", step + ["--devices", "cpu:2"], dict(env, OMP_NUM_THREADS=str(cores), SPMD_OVERLAP="1")),
               ("2 processes x cpu:1", mpirun + ["-np", "2"] + step + ["--devices", "cpu:1"],
                dict(env, OMP_NUM_THREADS=str(max(1, cores // 2)), SPMD_OVERLAP="1"))]
    for name, command, e in layouts:
        plain = parse_result(run(command, e, 1800), "step")[0]
        zero = parse_result(run(command + ["--shard-update"], e, 1800), "step")[0]
        print("  %-20s state per replica %8.3f MB -> %8.3f MB, step %8.1f ms -> %8.1f ms (ratio %.3f)" % (
            name, float(plain["opt_state_mb_per_replica"]), float(zero["opt_state_mb_per_replica"]),
            float(plain["median_ms"]), float(zero["median_ms"]), float(zero["median_ms"]) / float(plain["median_ms"])))
    print("ratio %.3f" % ratio)


if __name__ == "__main__":
    main()
