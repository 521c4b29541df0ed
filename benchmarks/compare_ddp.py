#!/usr/bin/env python3
"""spmd against PyTorch DDP, the peer a CPU user would pick, on the main job's configuration:
ResNet-18 (the seeds' architecture, tests/reference/torch_resnet18.py) at width 16 on 28x28
Fashion-MNIST-shaped inputs, global batch 128 over 2 replicas, SGD with momentum 0.9,
per-replica BatchNorm (DDP's default; no SyncBN), one thread per replica:

  spmd    1 process x cpu:2 (benchmarks/dist_bench step; the replicas are threads of one process)
  spmd    2 processes x cpu:1 under mpirun (the same binary)
  DDP     torch.nn.parallel.DistributedDataParallel over gloo, 2 processes x 1 thread

Each prints the median step time over --steps steps after a warm-up step, and images/s; the
last line is the ratio of spmd's best images/s to DDP's (target >= 1.6 at width 16). --rounds K
runs the three K times in turn (the same machine moves each one's step time 10-20% between runs)
and prints each round's ratio and their median. --full runs the seeds' configuration instead
(width 64, global batch 512), for the per-step ratio. --smoke runs tiny sizes once (ctest),
checking that every part runs and prints its ratio, not the target.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def ddp_worker(rank, world, port, width, batch, steps):
    """One DDP process: its half of the global batch, one thread; rank 0 prints the result."""
    import torch
    import torch.distributed as dist
    from torch import nn
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
    from torch_resnet18 import ResNet18

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(ResNet18(width))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    local = batch // world
    generator = torch.Generator().manual_seed(100 + rank)
    x = torch.rand(local, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (local,), generator=generator)
    times = []
    for step in range(steps + 1):  # the first step warms up
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        loss.item()
        if step > 0:
            times.append(time.perf_counter() - start)
    if rank == 0:
        print("result ddp median_ms=%.3f" % (1e3 * statistics.median(times)), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command, env, timeout=3600):
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("%s exited %d:\n%s" % (" ".join(command), p.returncode, p.stdout))
    return p.stdout


def result(output, kind):
    for line in output.splitlines():
        if line.startswith("result " + kind):
            return dict(kv.split("=", 1) for kv in line.split()[2:])
    sys.exit("no 'result %s' line in:\n%s" % (kind, output))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--steps", type=int, default=30,
                        help="timed steps per run (the median is reported; DDP's own time moves ~20%% between runs)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the three in turn this many times; print each round's ratio and the median")
    parser.add_argument("--full", action="store_true", help="width 64, global batch 512 (the seeds' configuration)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--ddp-worker", nargs=6, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ddp_worker:
        return ddp_worker(*args.ddp_worker)
    width, batch = (64, 512) if args.full else (16, 128)
    if args.smoke:
        width, batch, args.steps = 2, 8, 1
    if args.rounds < 1:
        sys.exit("--rounds must be at least 1, got %d" % args.rounds)
    bench = os.path.join(args.build, "benchmarks", "dist_bench")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               SPMD_THREADS_PER_REPLICA="1", SPMD_OVERLAP="1")
    step = [bench, "step", "--width", str(width), "--batch", str(batch), "--steps", str(args.steps)]
    mpirun = [args.mpirun, "--oversubscribe", "--bind-to", "none", "--timeout", "3600", "--mca", "pml", "ob1",
              "--mca", "btl", "self,vader,tcp", "-x", "OMP_NUM_THREADS", "-x", "SPMD_THREADS_PER_REPLICA",
              "-x", "SPMD_OVERLAP", "-np", "2"]
    rate = lambda ms: batch / (float(ms) / 1e3)
    ratios = []
    for round_ in range(args.rounds):
        threads = result(run(step + ["--devices", "cpu:2"], dict(env, OMP_NUM_THREADS="2")), "step")
        processes = result(run(mpirun + step + ["--devices", "cpu:1"], env), "step")
        ddp = run_ddp(env, width, batch, args.steps)
        rows = [("spmd, 1 process x cpu:2", float(threads["median_ms"])),
                ("spmd, 2 processes x cpu:1", float(processes["median_ms"])),
                ("PyTorch DDP (gloo), 2 processes", float(ddp["median_ms"]))]
        print("ResNet-18 width %d, global batch %d over 2 replicas, per-replica BN, SGD momentum, 1 thread each, "
              "median of %d steps%s:" % (width, batch, args.steps,
                                         " (round %d of %d)" % (round_ + 1, args.rounds) if args.rounds > 1 else ""))
        for label, ms in rows:
            print("  %-34s %9.1f ms per step %9.1f images/s" % (label, ms, rate(ms)))
        ratios.append(rows[2][1] / min(rows[0][1], rows[1][1]))
        print("ratio spmd/DDP images/s %.2f (best spmd layout; target >= 1.6 at width 16)" % ratios[-1], flush=True)
    if args.rounds > 1:
        print("ratios %s: median %.2f over %d rounds, %d of them >= 1.6" %
              (" ".join("%.2f" % r for r in ratios), statistics.median(ratios), len(ratios),
               sum(r >= 1.6 for r in ratios)))


def run_ddp(env, width, batch, steps):
    """DDP's two processes; rank 0's result line."""
    port = free_port()
    workers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--ddp-worker", str(rank), "2", str(port),
                                 str(width), str(batch), str(steps)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    outputs = [w.communicate(timeout=3600)[0] for w in workers]
    for w, out in zip(workers, outputs):
        if w.returncode != 0:
            sys.exit("a DDP worker exited %d:\n%s" % (w.returncode, out))
    return result(outputs[0], "ddp")

if __name__ == "__main__":
    main()
