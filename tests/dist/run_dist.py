#!/usr/bin/env python3
"""The multi-process checks, each a ctest entry (tests/CMakeLists.txt):

layouts    N = 4 replicas as 1 process x 4 threads, 2 x 2 and 4 x 1, and N = 6 as 1 x 6, 2 x 3
           and 3 x 2, give the same bits after 3 steps (parameters, BN state, optimizer state,
           losses, the losses' pmax and a parameter's pmean and psum) in exact mode, in f32 and f64, with cross- and per-replica BatchNorm, and
           every process holds them; so do 1x4, 2x2 and 4x1 with the default thread share (no
           thread settings at all); every run's psum folds in the order that defines exact mode
           (dist_train's checkFoldOrder, f64 values that cancel), and its ppermute (a ring) and
           all_to_all give their definitions across the processes (checkPermutations), as do
           all_gather, reduce_scatter and all_to_all within groups that cross them (checkGroupedAcross); fast mode
           (2 x 3) runs its own order and agrees to rounding.
faults     one process throws inside a step, one is killed, one hangs, one is stopped (SIGSTOP): mpirun ends non-zero
           within the collective timeout, the message names the process (and the replica and
           collective when the process can still speak), and the checkpoint written before
           the fault is intact. With ZeRO-1, process 0 reading the sliced parameters alone stops
           the job within the timeout, saying that every process must read them.
sample     the training sample's first epoch on a small slice, 1x4, 2x2 and 4x1 (and 2x2 with
           --shard-update, ZeRO-1, and with --fsdp, also with --accumulate): the same
           checkpoint tensors; metrics, checkpoints and plain progress lines (no bar, though
           Open MPI gives processes a pseudo-terminal) come from process 0 only.
agreement  processes given different flags (--lr, --seed, --width, --batch), a different captured
           value or a different replicated input all stop within 30 s naming it; a bit flipped
           in one replica's parameters is caught by the drift check, naming tensor and replica.
trace      the sample's --trace for 3 steps on cpu:2 and under mpirun -np 2: Chrome trace JSON that
           loads, every replica and communication track named, spans well nested per track,
           one file per process (pid = process index).
two_hosts  2 x 2 across two network namespaces joined by a veth pair (TCP only, mpirun
           starting the remote side with `ip netns exec`): the same bits as one host. Skips
           (exit 77) when this machine cannot create namespaces.

Every child gets a timeout; every process runs with one OpenMP thread per replica (but the
default-settings runs), so the layouts differ only in how replicas map to processes (thread
counts change oneDNN's rounding).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import time

SKIP = 77
TIMEOUT = 5  # SPMD_COLLECTIVE_TIMEOUT for the fault runs, seconds


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def mpirun_base(args, processes, threads, extra=(), env=None):
    env_vars = ["OMP_NUM_THREADS", "SPMD_COLLECTIVE_TIMEOUT", "SPMD_REDUCE", "SPMD_CPU_DEVICE_COUNT",
                "SPMD_THREADS_PER_REPLICA", "SPMD_TRACE"]
    command = [args.mpirun, "--oversubscribe", "--bind-to", "none", "--timeout", "240",
               "--mca", "pml", "ob1", "-np", str(processes)]
    command += list(extra) or ["--mca", "btl", "self,vader,tcp"]
    for v in env_vars:
        if env is None or v in env:
            command += ["-x", v]
    return command


def environment(threads, **more):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS=str(threads),
               SPMD_COLLECTIVE_TIMEOUT="120", SPMD_CPU_DEVICE_COUNT="8")
    env.pop("SPMD_REDUCE", None)
    env.update({k: str(v) for k, v in more.items()})
    return env


def run(command, env, timeout=300):
    start = time.time()
    p = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, time.time() - start


def launch(args, processes, per_process, out, extra_env=None, worker_args=(), mpi_extra=()):
    """Runs the worker as `processes` x cpu:`per_process` (no mpirun for one process)."""
    env = environment(per_process, **(extra_env or {}))
    worker = [args.worker, "--devices", "cpu:%d" % per_process, "--out", out] + list(worker_args)
    command = worker if processes == 1 else mpirun_base(args, processes, per_process, mpi_extra, env) + worker
    return run(command, env)


def read_all(prefix, processes):
    blobs = []
    for p in range(processes):
        with open("%s.%d" % (prefix, p), "rb") as f:
            blobs.append(f.read())
    return blobs


# The mesh check's state (dist_train's checkMesh) of each exact run, by run name.
MESH_BLOBS = {}


def exact_run(args, processes, per, name, flags, env_extra, default_threads=False):
    out = os.path.join(args.scratch, name)
    env = environment(per, **env_extra)
    if default_threads:  # the runtime's own share of the cores
        env.pop("OMP_NUM_THREADS", None)
        env.pop("SPMD_THREADS_PER_REPLICA", None)
    worker = [args.worker, "--devices", "cpu:%d" % per, "--out", out] + flags
    command = worker if processes == 1 else mpirun_base(args, processes, per, env=env) + worker
    rc, log, seconds = run(command, env)
    if rc != 0:
        fail("%s (%d x cpu:%d) exited %d:\n%s" % (name, processes, per, rc, log))
    blobs = read_all(out, processes)
    for p, blob in enumerate(blobs):
        if blob != blobs[0]:
            fail("%s: process %d holds other bits than process 0" % (name, p))
    if "--accumulate" not in flags:
        folds = [l for l in log.splitlines() if "fold order: exact mode's definition holds" in l]
        if len(folds) != processes:
            fail("%s: not every process reports the psum fold check (dist_train's checkFoldOrder):\n%s" % (name, log))
        permutations = [l for l in log.splitlines() if "ppermute and all_to_all: their definitions hold" in l]
        if len(permutations) != processes:
            fail("%s: not every process reports the permutation check (dist_train's checkPermutations):\n%s" %
                 (name, log))
        if (processes * per) % 2 == 0 and not all("within groups {r, r + " in l for l in permutations):
            fail("%s: not every process reports the grouped all_gather, reduce_scatter and all_to_all check "
                 "(dist_train's checkGroupedAcross):\n%s" % (name, log))
        meshes = [l for l in log.splitlines() if "tensor-parallel MLP on mesh" in l]
        blocks = [l for l in log.splitlines() if "tensor-parallel transformer block on mesh" in l]
        if (processes * per) % 2 == 0 and (len(meshes) != processes or len(blocks) != processes):
            # an even replica count: a mesh of 2 x N/2
            fail("%s: not every process reports the tensor-parallel checks (dist_train's checkMesh and "
                 "checkMeshTransformer):\n%s" % (name, log))
        if meshes:
            mesh = read_all(out + ".mesh", processes)
            if any(m != mesh[0] for m in mesh):
                fail("%s: the mesh check's state differs between processes" % name)
            MESH_BLOBS[name] = mesh[0]
    threads = sorted(set(l.split(" threads per replica")[0].rsplit(", ", 1)[-1] for l in log.splitlines()
                         if "threads per replica" in l))
    return blobs[0], threads, seconds


def check_layouts(args):
    # Exact mode: every split of N replicas into processes x devices gives the same bits, in f32
    # and in f64 (where a wrong fold order shows: an f32 fold of few values is often exact in any
    # order), with cross-replica and per-replica BatchNorm, at one thread per replica.
    layouts = {4: [(1, 4), (2, 2), (4, 1)], 6: [(1, 6), (2, 3), (3, 2)]}
    reference = reference_n4_f32 = None
    for n, splits in layouts.items():
        for dtype in ["f32", "f64"]:
            for bn in ["cross", "per"]:
                results = {}
                for processes, per in splits:
                    name = "exact_n%d_%s_%s_%dx%d" % (n, dtype, bn, processes, per)
                    blob, threads, seconds = exact_run(args, processes, per, name, ["--dtype", dtype, "--bn", bn],
                                                       {"SPMD_THREADS_PER_REPLICA": 1})
                    if threads != ["1"]:
                        fail("%s: expected 1 thread per replica, the worker says %s" % (name, threads))
                    results[(processes, per)] = blob
                    print("%s: %d bytes of state, %.1f s" % (name, len(blob), seconds))
                    if n == 6 and dtype == "f32" and bn == "cross" and (processes, per) == (2, 3):
                        reference = blob
                    if n == 4 and dtype == "f32" and bn == "cross" and (processes, per) == (1, 4):
                        reference_n4_f32 = blob
                first = results[splits[0]]
                for split, blob in results.items():
                    if blob != first:
                        fail("exact mode, N = %d, %s, %s BatchNorm: %d x %d differs from %d x %d" %
                             (n, dtype, bn, split[0], split[1], splits[0][0], splits[0][1]))
                print("exact N = %d %s %s-replica BN: %s give the same bits" %
                      (n, dtype, bn, ", ".join("%dx%d" % s for s in splits)))
        meshes = {name: blob for name, blob in MESH_BLOBS.items() if name.startswith("exact_n%d_" % n)}
        if len(set(meshes.values())) != 1:
            fail("the tensor-parallel MLP and transformer block on a mesh of %d replicas differs between layouts: %s" %
                 (n, sorted(meshes)))
        print("tensor-parallel MLP and transformer block, mesh of %d replicas: %d runs (%s) give the same bits" %
              (n, len(meshes), ", ".join("%dx%d" % s for s in splits)))
    # Mixed precision (bf16 activations, f32 parameters and all-reduces) keeps the promise too.
    splits = layouts[4]
    results = {}
    for processes, per in splits:
        name = "exact_n4_bf16_cross_%dx%d" % (processes, per)
        results[(processes, per)] = exact_run(args, processes, per, name, ["--dtype", "bf16", "--bn", "cross"],
                                              {"SPMD_THREADS_PER_REPLICA": 1})[0]
    for split, blob in results.items():
        if blob != results[splits[0]]:
            fail("exact mode, N = 4, bf16 activations: %d x %d differs from %d x %d" %
                 (split[0], split[1], splits[0][0], splits[0][1]))
    if results[splits[0]] == reference_n4_f32:
        fail("exact mode, N = 4: the bf16 run's state equals the f32 run's: --dtype bf16 changed nothing")
    print("exact N = 4 bf16 activations cross-replica BN: %s give the same bits" % ", ".join("%dx%d" % s for s in splits))
    # Gradient accumulation: P x K x A with per-replica BatchNorm is the same bits as P * K * A
    # replicas, in f32 and f64 (the micro-batches are virtual replicas of the same fold tree),
    # the losses' pmax (folded over the micro-batches by max) and a parameter's pmean and psum
    # (the same on every micro-batch: counted once per virtual replica) included; a fourth number runs that many of a device's micro-batches at once (--micro-at-once; 1
    # otherwise, so that the host's core count does not decide what runs).
    accumulation = {4: [(1, 2, 2), (1, 1, 4), (2, 1, 2), (2, 1, 2, 2)], 6: [(1, 3, 2), (3, 1, 2)]}
    for n, splits in accumulation.items():
        for dtype in ["f32", "f64"]:
            acc_reference = exact_run(args, 1, n, "acc_n%d_%s_ref" % (n, dtype), ["--dtype", dtype, "--bn", "per"],
                                  {"SPMD_THREADS_PER_REPLICA": 1})[0]
            for split in splits:
                processes, per, steps, at_once = (split + (1,))[:4]
                name = "acc_n%d_%s_%dx%dx%d_%d" % (n, dtype, processes, per, steps, at_once)
                blob, _, seconds = exact_run(args, processes, per, name,
                                             ["--dtype", dtype, "--bn", "per", "--accumulate", str(steps),
                                              "--micro-at-once", str(at_once)],
                                             {"SPMD_THREADS_PER_REPLICA": 1})
                if blob != acc_reference:
                    fail("accumulation, %s: %d x %d x %d (%d at once) differs from 1 x %d x 1" %
                         (dtype, processes, per, steps, at_once, n))
            print("exact N = %d %s per-replica BN: %s (P x K x A, at once) give the bits of 1x%dx1" %
                  (n, dtype, ", ".join("x".join(map(str, s)) for s in splits), n))
    # Cross-replica BatchNorm with accumulation: statistics over each micro-batch's P x K replicas,
    # running statistics averaged over the micro-batches; 1 x 2 x 2 and 2 x 1 x 2 agree.
    cross = {split: exact_run(args, split[0], split[1], "acc_cross_%dx%dx%d" % split,
                              ["--bn", "cross", "--accumulate", str(split[2])], {"SPMD_THREADS_PER_REPLICA": 1})[0]
             for split in [(1, 2, 2), (2, 1, 2)]}
    if cross[(1, 2, 2)] != cross[(2, 1, 2)]:
        fail("accumulation with cross-replica BatchNorm: 2 x 1 x 2 differs from 1 x 2 x 2")
    print("exact N = 4 f32 cross-replica BN with accumulation: 1x2x2, 2x1x2 give the same bits")
    # Its micro-batches all-reduce across processes, which must happen in one order everywhere:
    # asking for two at once is refused, naming why, before any step (not a hang).
    out = os.path.join(args.scratch, "acc_cross_at_once")
    env = environment(1, SPMD_THREADS_PER_REPLICA=1)
    rc, log, seconds = run(mpirun_base(args, 2, 1, env=env) +
                           [args.worker, "--devices", "cpu:1", "--out", out, "--bn", "cross", "--accumulate", "2",
                            "--micro-at-once", "2"], env, timeout=120)
    expected = "microBatchesAtOnce is 2, but the micro-batches' part all-reduces across processes"
    if rc == 0 or seconds > 60 or expected not in log:
        fail("2 x cpu:1 x 2 cross-replica BN with 2 micro-batches at once: not refused with '%s' (exit %d, %.1f s):\n%s"
             % (expected, rc, seconds, log))
    print("cross-replica BN with 2 micro-batches at once across processes: refused, naming why")
    # The default thread share (no OMP_NUM_THREADS, no SPMD_THREADS_PER_REPLICA): the host's cores
    # over every replica on it, so 1 x 4, 2 x 2 and 4 x 1 agree without any setting.
    results, shares = {}, set()
    for processes, per in layouts[4]:
        blob, threads, _ = exact_run(args, processes, per, "default_%dx%d" % (processes, per), [], {},
                                     default_threads=True)
        results[(processes, per)] = blob
        shares.update(threads)
    if len(shares) != 1:
        fail("default threads per replica differ between layouts: %s" % sorted(shares))
    if len(set(results.values())) != 1:
        fail("default settings: 1x4, 2x2 and 4x1 give different bits (threads per replica %s)" % sorted(shares))
    print("default settings (%s threads per replica everywhere): 1x4, 2x2 and 4x1 give the same bits" %
          shares.pop())
    # fast mode: 2 x 3, where its order (each process's tree of 3, then MPI_Allreduce of the two
    # sums) differs from exact mode's: it ran (the worker's fold check holds fast mode's
    # definition and finds it other than exact's), is repeatable, and is within rounding of
    # exact mode's 2 x 3 state, element by element.
    out = os.path.join(args.scratch, "fast_2x3")
    runs = []
    for attempt in range(2):
        rc, log, _ = launch(args, 2, 3, out, {"SPMD_REDUCE": "fast", "SPMD_THREADS_PER_REPLICA": 1})
        if rc != 0:
            fail("fast 2 x cpu:3 exited %d:\n%s" % (rc, log))
        folds = [l for l in log.splitlines() if "fold order: fast mode's definition holds over 6 replicas" in l]
        if len(folds) != 2 or any("the same sums as exact" in l for l in folds):
            fail("fast 2 x cpu:3: the workers do not report fast mode's own fold order:\n%s" % log)
        runs.append(read_all(out, 2)[0])
    if runs[0] != runs[1]:
        fail("fast mode: two runs of 2 x cpu:3 differ")
    if runs[0] == reference:
        fail("fast mode: 2 x cpu:3 gives exact mode's bits; its own fold order did not run")
    # Tensor by tensor (dist_train's index), max |fast - exact| / max |exact|: within 1e-3 (2 x 3,
    # 3 steps: 4e-5 measured) and the losses within 1e-5. Conv biases are left out: BatchNorm
    # cancels them, so their gradient is exactly zero and both runs hold rounding noise there.
    offset, worst, which = 0, 0.0, ""
    with open(out + ".index") as index:
        for line in index:
            name, count = line.split()
            count = int(count)
            a = struct.unpack_from("%df" % count, reference, offset * 4)
            b = struct.unpack_from("%df" % count, runs[0], offset * 4)
            offset += count
            if ".conv" in name and name.endswith(".bias"):
                continue
            error = max(abs(x - y) for x, y in zip(a, b)) / max(max(abs(x) for x in a), 1e-30)
            if error > (1e-5 if name == "losses" else 1e-3):
                fail("fast mode: %s differs from exact mode's by %.2e of its largest value" % (name, error))
            if error > worst:
                worst, which = error, name
    if offset * 4 != len(reference):
        fail("fast mode: dist_train's index covers %d of %d bytes" % (offset * 4, len(reference)))
    print("fast mode 2x3: its own fold order, repeatable; largest difference from exact %.2e of a tensor's "
          "largest value (%s)" % (worst, which))


def check_faults(args):
    env = {"SPMD_COLLECTIVE_TIMEOUT": TIMEOUT}
    for fault, expect in [("throw", ["process 1 of 2", "replica 3 of 4", "label 99", "softmax_cross_entropy"]),
                          ("kill", ["rank 1", "signal 9"]),
                          ("hang", ["process 0 of 2", "process(es) 1 (replicas 2-3) never reached it", "all_reduce", "timed out"]),
                          ("stop", ["process 0 of 2", "process(es) 1 (replicas 2-3) never reached it", "all_reduce", "timed out"])]:
        checkpoint = os.path.join(args.scratch, "fault_%s.safetensors" % fault)
        out = os.path.join(args.scratch, "fault_%s" % fault)
        rc, log, seconds = launch(args, 2, 2, out, env,
                                  ["--fault", fault, "--fault-process", "1", "--fault-step", "2",
                                   "--checkpoint", checkpoint])
        print("%s: mpirun exited %d after %.1f s" % (fault, rc, seconds))
        if rc == 0:
            fail("%s: the job succeeded:\n%s" % (fault, log))
        if seconds > TIMEOUT + 20:
            fail("%s: the job took %.1f s to end (timeout %d s)" % (fault, seconds, TIMEOUT))
        for text in expect:
            if text not in log:
                fail("%s: the output does not say '%s':\n%s" % (fault, text, log))
        header = read_safetensors_header(checkpoint)
        if header.get("__metadata__", {}).get("step") != "2":
            fail("%s: the checkpoint written after step 2 is not intact: %s" % (fault, header.get("__metadata__")))
        print("%s: named as expected; checkpoint of step 2 intact (%d tensors)" % (fault, len(header) - 1))
    # ZeRO-1: process 0 alone reads the sliced parameters (to save them) while process 1 goes on:
    # the gather times out and says that every process must read them.
    out = os.path.join(args.scratch, "fault_lone_read")
    rc, log, seconds = launch(args, 2, 2, out, env, ["--fault", "lone-read", "--checkpoint", out + ".safetensors"])
    print("lone-read: mpirun exited %d after %.1f s" % (rc, seconds))
    if rc == 0 or seconds > TIMEOUT + 20:
        fail("lone-read: expected the job to stop within the timeout, got exit %d after %.1f s:\n%s" % (rc, seconds, log))
    for text in ["reading a sliced (shardUpdate, ZeRO-1) tensor", "read it on every process", "timed out"]:
        if text not in log:
            fail("lone-read: the output does not say '%s':\n%s" % (text, log))
    print("lone-read: named as expected")


def mpmd(args, env, first, second):
    """Two processes running different command lines (mpirun's app contexts)."""
    return mpirun_base(args, 1, 1, env=env) + first + [":", "-np", "1"] + second


def check_agreement(args):
    # Processes started with different flags or inputs stop before the first step, all of them
    # non-zero within seconds, naming what differs; a flipped bit in one replica's parameters is
    # caught by the next drift check, naming the tensor and the replica.
    env = environment(1, SPMD_THREADS_PER_REPLICA=1)
    flags = ["--epochs", "1", "--train-limit", "96", "--test-limit", "32", "--batch", "48", "--eval-batch", "32",
             "--width", "2", "--no-plot", "--devices", "cpu:1"]
    for flag, a, b in [("--lr", "0.05", "0.1"), ("--seed", "0", "1"), ("--width", "2", "4"), ("--batch", "48", "24")]:
        out = os.path.join(args.scratch, "agree_%s" % flag.strip("-"))
        shutil.rmtree(out, ignore_errors=True)
        first = [args.sample] + flags + ["--out", out, flag, a]
        second = [args.sample] + flags + ["--out", out + "_1", flag, b]
        rc, log, seconds = run(mpmd(args, env, first, second), env, timeout=120)
        print("sample, process 1 with %s %s: exit %d after %.1f s" % (flag, b, rc, seconds))
        if rc == 0:
            fail("processes with different %s finished with exit 0:\n%s" % (flag, log))
        if seconds > 30:
            fail("processes with different %s took %.1f s to stop" % (flag, seconds))
        expected = "process 1 has %s = " % flag
        if expected not in log:
            fail("the message does not say '%s':\n%s" % (expected, log))
    for name, worker_flag, expected in [("captured value", "--lr", "traced step"),
                                         ("replicated input", "--init-seed", "replicated input argument 0.")]:
        out = os.path.join(args.scratch, "agree_worker")
        base = [args.worker, "--devices", "cpu:1", "--out", out]
        rc, log, seconds = run(mpmd(args, env, base, base + [worker_flag, "3"]), env, timeout=120)
        print("worker, process 1 with %s 3: exit %d after %.1f s" % (worker_flag, rc, seconds))
        if rc == 0 or seconds > 30 or expected not in log or "differ" not in log:
            fail("a %s that differs between processes was not named within 30 s (exit %d, %.1f s):\n%s" %
                 (name, rc, seconds, log))
    # How kernels are chosen must agree too (process 0 chooses for all, runtime/device/KernelChoice.h).
    out = os.path.join(args.scratch, "agree_pins")
    base = [args.worker, "--devices", "cpu:1", "--out", out]
    rc, log, seconds = run(mpmd(args, env, base, ["-x", "SPMD_KERNELS=conv2d:onednn"] + base), env, timeout=120)
    print("worker, process 1 with SPMD_KERNELS=conv2d:onednn: exit %d after %.1f s" % (rc, seconds))
    if rc == 0 or seconds > 30 or "process 1 has kernel pins (SPMD_KERNELS) = conv2d:onednn" not in log:
        fail("kernel pins that differ between processes were not named within 30 s (exit %d, %.1f s):\n%s" %
             (rc, seconds, log))
    # So must the activation layout the GPU's compilations take (cuDNN's NHWC kernels round
    # otherwise), named before the first step whatever the backend.
    rc, log, seconds = run(mpmd(args, env, base, ["-x", "SPMD_CHANNELS_LAST=1"] + base), env, timeout=120)
    print("worker, process 1 with SPMD_CHANNELS_LAST=1: exit %d after %.1f s" % (rc, seconds))
    if rc == 0 or seconds > 30 or "process 1 has channels-last activations on cuda and sim (SPMD_CHANNELS_LAST) = yes" not in log:
        fail("an activation layout that differs between processes was not named within 30 s (exit %d, %.1f s):\n%s" %
             (rc, seconds, log))
    # A junk switch that MPI's start reads fails cleanly on every process with our message, not
    # with Open MPI's "initialize MPI more than once" (a failed start was tried again).
    out = os.path.join(args.scratch, "junk_switch")
    command = mpirun_base(args, 2, 1, ["-x", "SPMD_CHECK_COLLECTIVES=maybe", "--mca", "btl", "self,vader,tcp"], env)
    rc, log, seconds = run(command + [args.worker, "--devices", "cpu:1", "--out", out], env, timeout=120)
    print("SPMD_CHECK_COLLECTIVES=maybe under mpirun: exit %d after %.1f s" % (rc, seconds))
    if rc == 0 or seconds > 30 or "SPMD_CHECK_COLLECTIVES" not in log or "more than once" in log:
        fail("a junk SPMD_CHECK_COLLECTIVES under mpirun did not stop every process with a message naming it "
             "(exit %d, %.1f s):\n%s" % (rc, seconds, log))
    # Kernel variants timed by process 0 are run by every process: process 1, with a kernel cache
    # of its own (nothing remembered, so it would time and might choose otherwise), says it took
    # process 0's choices, and the job gives the bits of one process on cpu:2 (which reads process
    # 0's cache).
    fresh = os.path.join(args.scratch, "fresh_kernel_cache")
    shutil.rmtree(fresh, ignore_errors=True)
    out = os.path.join(args.scratch, "choices_2x1")
    base = [args.worker, "--devices", "cpu:1", "--out", out]
    rc, log, seconds = run(mpmd(args, env, base, ["-x", "SPMD_KERNEL_CACHE=" + fresh, "-x", "SPMD_LOG_COMPILES=1"] + base),
                           env, timeout=120)
    if rc != 0 or "process 0's choice" not in log:
        fail("process 1 with its own kernel cache did not report taking process 0's kernel choices (exit %d):\n%s" %
             (rc, log))
    reference = exact_run(args, 1, 2, "choices_1x2", [], {"SPMD_THREADS_PER_REPLICA": 1})[0]
    if read_all(out, 2) != [reference, reference]:
        fail("2 x cpu:1 with process 1's own kernel cache differs from 1 x cpu:2")
    print("kernel choices: process 1 ran process 0's (%d steps said so); the bits of 1 x cpu:2" %
          log.count("process 0's choice"))
    rc, log, seconds = launch(args, 2, 2, os.path.join(args.scratch, "flip"), {"SPMD_THREADS_PER_REPLICA": 1},
                              ["--fault", "flip", "--fault-process", "1", "--fault-step", "1"])
    print("a bit flipped in replica 2's fc.weight: exit %d after %.1f s" % (rc, seconds))
    for text in ["drift check", "fc.weight", "replica 2", "first at element"]:
        if rc == 0 or text not in log:
            fail("the drift check did not report '%s' (exit %d):\n%s" % (text, rc, log))
    print([l for l in log.splitlines() if "drift check" in l][0])


def read_safetensors_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    if len(data) != end:
        fail("%s: %d data bytes, header says %d" % (path, len(data), end))
    return header


def safetensors_tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}


def check_sample(args):
    # 190 images at batch 50 over 4 devices: batches of 50 dealt 13 + 13 + 12 + 12 rows (padded to
    # 13), the last of 40 dealt 10 each, so padding crosses processes in every layout.
    flags = ["--epochs", "1", "--train-limit", "190", "--test-limit", "64", "--batch", "50", "--eval-batch", "32",
             "--width", "2", "--no-plot"]
    results = {}
    for processes, per in [(1, 4), (2, 2), (4, 1)]:
        out = os.path.join(args.scratch, "sample_%dx%d" % (processes, per))
        shutil.rmtree(out, ignore_errors=True)
        env = environment(per)
        sample = [args.sample, "--devices", "cpu:%d" % per, "--out", out] + flags
        command = sample if processes == 1 else mpirun_base(args, processes, per, env=env) + sample
        rc, log, seconds = run(command, env)
        if rc != 0:
            fail("sample %d x cpu:%d exited %d:\n%s" % (processes, per, rc, log))
        if log.count("epoch 1/1:") != 1:
            fail("sample %d x cpu:%d: expected one epoch line (from process 0 only):\n%s" % (processes, per, log))
        results["%dx%d" % (processes, per)] = safetensors_tensors(os.path.join(out, "checkpoint.safetensors"))
        epoch_line = [l for l in log.splitlines() if l.startswith("epoch 1/1:")][0]
        if not epoch_line.startswith("epoch 1/1: 190 images,"):
            fail("sample %d x cpu:%d: expected every one of the 190 images seen:\n%s" % (processes, per, log))
        print("sample %d x cpu:%d: %s (%.1f s)" % (processes, per, epoch_line, seconds))
        if processes > 1 and "processes" not in log:
            fail("sample %d x cpu:%d does not say it runs as several processes:\n%s" % (processes, per, log))
        # Open MPI hands its processes a pseudo-terminal even when the log is a file: a job of
        # several processes must still log plain lines (process 0's), never a redrawn bar.
        if processes > 1 and ("\r" in log or log.count("epoch 1/1 step ") < 1):
            fail("sample %d x cpu:%d: expected plain progress lines, not a bar:\n%r" % (processes, per, log))
    reference = results["1x4"]
    for layout, tensors in results.items():
        if tensors != reference:
            differ = [k for k in reference if tensors.get(k) != reference[k]]
            fail("sample: layout %s differs from 1 x cpu:4 in %d tensors, e.g. %s" % (layout, len(differ), differ[:3]))
    print("sample: the checkpoint after one epoch is the same bits for 1x4, 2x2 and 4x1 (%d tensors)" % len(reference))

    def sample_run(name, processes, per, extra, env, expect_epochs=1):
        out = os.path.join(args.scratch, name)
        if "--resume" not in extra:
            shutil.rmtree(out, ignore_errors=True)
        sample = [args.sample, "--devices", "cpu:%d" % per, "--out", out] + flags + list(extra)
        command = sample if processes == 1 else mpirun_base(args, processes, per, env=env) + sample
        rc, log, seconds = run(command, env)
        if rc != 0:
            fail("sample %s exited %d:\n%s" % (name, rc, log))
        return safetensors_tensors(os.path.join(out, "checkpoint.safetensors")), log

    def same(a, b, what):
        differ = [k for k in a if b.get(k) != a[k]]
        if differ or len(a) != len(b):
            fail("sample: %s: %d of %d tensors differ, e.g. %s" % (what, len(differ), len(a), differ[:3]))
        print("sample: %s: the same %d tensors" % (what, len(a)))

    # The README's launch with no thread settings: 2 processes x cpu:1 is one process on cpu:2.
    plain = environment(1)
    plain.pop("OMP_NUM_THREADS")
    one, log = sample_run("default_1x2", 1, 2, [], plain)
    two, log2 = sample_run("default_2x1", 2, 1, [], plain)
    same(one, two, "mpirun -np 2 --devices cpu:1 vs cpu:2, default threads")
    # Accumulation and resume across layouts, one thread per replica.
    env = environment(1, SPMD_THREADS_PER_REPLICA=1)
    env.pop("OMP_NUM_THREADS")
    reference, _ = sample_run("acc_1x2", 1, 2, [], env)
    accumulated, log = sample_run("acc_1x1x2", 1, 1, ["--accumulate", "2"], env)
    if "gradient accumulation: 2 micro-batches" not in log:
        fail("the sample does not say it accumulates:\n%s" % log)
    same(reference, accumulated, "--accumulate 2 on cpu:1 vs cpu:2")
    # ZeRO-1 across processes: the sharded update gives the replicated checkpoint's bits (the
    # slices gathered from both processes for the save), and a replicated epoch resumes sharded.
    zero, log = sample_run("zero_2x2", 2, 2, ["--shard-update"], environment(2))
    if "ZeRO-1 (--shard-update)" not in log:
        fail("the sample does not say it shards the update:\n%s" % log)
    same(results["1x4"], zero, "--shard-update at 2 x cpu:2 vs 1 x cpu:4")
    # FSDP across processes: parameters gathered per layer from both processes' slices.
    fsdp, log = sample_run("fsdp_2x2", 2, 2, ["--fsdp"], environment(2))
    if "FSDP (--fsdp)" not in log:
        fail("the sample does not say it shards the parameters:\n%s" % log)
    same(results["1x4"], fsdp, "--fsdp at 2 x cpu:2 vs 1 x cpu:4")
    # FSDP with gradient accumulation: 2 processes x cpu:1 x 2 micro-batches are 1 x cpu:4's four
    # replicas; each device's micro-batches share its slice.
    fsdp_acc, log = sample_run("fsdp_acc_2x1x2", 2, 1, ["--fsdp", "--accumulate", "2"], environment(1))
    if "FSDP (--fsdp)" not in log or "gradient accumulation: 2 micro-batches" not in log:
        fail("the sample does not say it shards the parameters and accumulates:\n%s" % log)
    same(results["1x4"], fsdp_acc, "--fsdp --accumulate 2 at 2 x cpu:1 vs 1 x cpu:4")
    two_epochs, _ = sample_run("two_epochs_1x2", 1, 2, ["--epochs", "2"], env)
    for name, processes, per, extra in [("resume_2x1", 2, 1, []), ("resume_1x1x2", 1, 1, ["--accumulate", "2"]),
                                        ("resume_zero_2x1", 2, 1, ["--shard-update"]),
                                        ("resume_fsdp_2x1", 2, 1, ["--fsdp"])]:
        sample_run(name, 1, 2, [], env)  # epoch 1 at 1 x cpu:2
        resumed, log = sample_run(name, processes, per, ["--epochs", "2", "--resume", os.path.join(args.scratch, name)] +
                                  extra, env)
        if "resumed" not in log:
            fail("sample %s did not resume:\n%s" % (name, log))
        same(two_epochs, resumed, "epoch 1 at 1x2, epoch 2 at %s vs two epochs at 1x2" % name.split("_", 1)[1])


def check_two_hosts(args):
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("SKIP: two simulated hosts need root and iproute2 (ip netns) to create network namespaces")
        sys.exit(SKIP)
    tag = str(os.getpid())
    ns = ["spmd_a" + tag, "spmd_b" + tag]
    address = ["10.213.77.1", "10.213.77.2"]
    veth = ["spa" + tag, "spb" + tag]

    def ip(*words, check=True):
        p = subprocess.run(["ip"] + list(words), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and p.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(words), p.stdout.strip()))
        return p

    try:
        try:
            for n in ns:
                ip("netns", "add", n)
            ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
            for i in range(2):
                ip("link", "set", veth[i], "netns", ns[i])
                ip("netns", "exec", ns[i], "ip", "addr", "add", address[i] + "/24", "dev", veth[i])
                ip("netns", "exec", ns[i], "ip", "link", "set", veth[i], "up")
                ip("netns", "exec", ns[i], "ip", "link", "set", "lo", "up")
        except (RuntimeError, OSError) as e:
            print("SKIP: this machine cannot create the two network namespaces (%s)" % e)
            sys.exit(SKIP)
        reference_out = os.path.join(args.scratch, "one_host")
        rc, log, _ = launch(args, 2, 2, reference_out)
        if rc != 0:
            fail("2 x cpu:2 on one host exited %d:\n%s" % (rc, log))
        out = os.path.join(args.scratch, "two_hosts")
        subnet = "10.213.77.0/24"
        agent = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsrsh.sh")
        env = environment(2, SPMD_NSRSH_HOSTS="%s=%s %s=%s" % (address[0], ns[0], address[1], ns[1]))
        command = ["ip", "netns", "exec", ns[0]] + mpirun_base(
            args, 2, 2, env=env, extra=["-H", "%s:1,%s:1" % tuple(address), "--mca", "plm_rsh_agent", agent,
                         "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", subnet,
                         "--mca", "oob_tcp_if_include", subnet])
        command += [args.worker, "--devices", "cpu:2", "--out", out]
        rc, log, seconds = run(command, env)
        if rc != 0:
            fail("2 x cpu:2 across two namespaces exited %d:\n%s" % (rc, log))
        print(log.strip())
        one, two = read_all(reference_out, 2), read_all(out, 2)
        if two[0] != one[0] or two[1] != one[0]:
            fail("two simulated hosts give other bits than one host")
        print("two simulated hosts (TCP over a veth pair): the same bits as one host (%.1f s)" % seconds)
    finally:
        for n in ns:
            ip("netns", "del", n, check=False)


def check_trace_file(path, want_tracks, pid):
    """A Chrome trace the sample wrote: valid JSON, the tracks named, spans well nested per track."""
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        fail("trace %s does not load as Chrome trace JSON: %s" % (path, e))
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    missing = [t for t in want_tracks if t not in names.values()]
    if missing:
        fail("trace %s lacks the tracks %s (it has %s)" % (path, missing, sorted(names.values())))
    spans = [e for e in events if e["ph"] == "X"]
    if any(e["pid"] != pid for e in events):
        fail("trace %s: every event must carry pid %d (the process index)" % (path, pid))
    by_track = {}
    for e in spans:
        if e["tid"] not in names:
            fail("trace %s: event %s on the unnamed track %s" % (path, e["name"], e["tid"]))
        if e["dur"] < 0:
            fail("trace %s: event %s has a negative duration" % (path, e["name"]))
        by_track.setdefault(e["tid"], []).append(e)
    for tid, track in by_track.items():
        stack = []
        for e in sorted(track, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"] + 1e-3:
                stack.pop()
            end = e["ts"] + e["dur"]
            if stack and end > stack[-1] + 1e-3:
                fail("trace %s: on track %s the span %s (%.3f..%.3f us) overlaps its neighbour without nesting"
                     % (path, names[tid], e["name"], e["ts"], end))
            stack.append(end)
    steps = [e for e in spans if e["cat"] == "step"]
    if not steps or not all("detail" in e["args"] and "bytes" in e["args"] for e in steps):
        fail("trace %s: steps must name their layer (detail) and bytes" % path)
    if not any(e["cat"] == "compile" for e in spans):
        fail("trace %s: no compile span" % path)
    return len(spans)


def check_overlap(path):
    """The gradient all-reduces ran behind the backward pass under mpirun, as the replica's event
    order shows: an all_reduce step handed its buckets to the communication thread, other steps ran,
    and only then did the replica wait for it ("wait for all_reduce"; with the collectives run in
    the foreground there is no wait span at all). Returns how many all-reduces overlapped."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    replica = sorted((e for e in events if e["ph"] == "X" and names.get(e["tid"]) == "replica cpu:0"),
                     key=lambda e: e["ts"])
    overlapped, handed, ran = 0, 0, 0  # all_reduces handed off, steps run since
    for e in replica:
        if e["cat"] == "step" and e["name"] == "all_reduce":
            handed += 1
        elif e["cat"] == "step" and handed:
            ran += 1
        elif e["cat"] == "wait" and e["name"] == "wait for all_reduce":
            if handed and ran:
                overlapped += 1
            handed, ran = max(handed - 1, 0), 0
    if not overlapped:
        fail("trace %s: no all_reduce ran behind other steps (each was waited for before the next step, or "
             "ran in the foreground): the communication thread's overlap is off" % path)
    return overlapped


def check_trace(args):
    flags = ["--epochs", "1", "--train-limit", "192", "--test-limit", "32", "--batch", "48", "--eval-batch", "32",
             "--width", "2", "--no-plot", "--max-steps", "3", "--trace"]
    env = environment(1)
    out = os.path.join(args.scratch, "trace_1x2")
    shutil.rmtree(out, ignore_errors=True)
    rc, log, _ = run([args.sample, "--devices", "cpu:2", "--out", out] + flags, env)
    if rc != 0:
        fail("sample --trace on cpu:2 exited %d:\n%s" % (rc, log))
    n = check_trace_file(os.path.join(out, "trace.json"), ["host", "replica cpu:0", "replica cpu:1",
                                                           "collectives of replica 0", "collectives of replica 1"], 0)
    print("trace, 1 process x cpu:2: %d spans, every track present, well nested" % n)
    out = os.path.join(args.scratch, "trace_2x1")
    shutil.rmtree(out, ignore_errors=True)
    rc, log, _ = run(mpirun_base(args, 2, 1, env=env) + [args.sample, "--devices", "cpu:1", "--out", out] + flags, env)
    if rc != 0:
        fail("sample --trace under mpirun -np 2 exited %d:\n%s" % (rc, log))
    for process in (0, 1):
        n = check_trace_file(os.path.join(out, "trace.%d.json" % process),
                             ["host", "replica cpu:0", "communication thread"], process)
        print("trace, process %d of 2: %d spans, every track present, well nested" % (process, n))
    # The gradients in 4 KB buckets (the width-2 model's in one bucket would be read at once).
    out = os.path.join(args.scratch, "overlap_2x1")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rc, log, _ = run(mpirun_base(args, 2, 1, env=dict(env, SPMD_TRACE="x")) +
                     [args.worker, "--devices", "cpu:1", "--out", os.path.join(out, "state"), "--steps", "2",
                      "--bucket-bytes", "4096"], dict(env, SPMD_TRACE=os.path.join(out, "trace.json")))
    if rc != 0:
        fail("the worker under mpirun -np 2 with SPMD_TRACE exited %d:\n%s" % (rc, log))
    for process in (0, 1):
        overlapped = check_overlap(os.path.join(out, "trace.%d.json" % process))
        print("trace, process %d of 2, 4 KB buckets: %d all-reduces ran behind later steps" % (process, overlapped))



def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("check", choices=["layouts", "faults", "sample", "two_hosts", "agreement", "trace"])
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--sample", required=True)
    parser.add_argument("--scratch", required=True)
    args = parser.parse_args()
    os.makedirs(args.scratch, exist_ok=True)
    {"layouts": check_layouts, "faults": check_faults, "sample": check_sample, "two_hosts": check_two_hosts,
     "agreement": check_agreement, "trace": check_trace}[args.check](args)
    print("PASS: " + args.check)


if __name__ == "__main__":
    main()
