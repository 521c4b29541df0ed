#!/usr/bin/env python3
"""Cross-environment drift: runs DriftBitsTest (tests/unit/DriftBitsTest.cpp) with OpenMP at 1
and 2 threads, with oneDNN and our own kernels held to AVX2, and with our own kernels held to
their portable code (SPMD_MAX_CPU_ISA), each writing its workloads' bit hashes, and compares them
where the design promises equal bits:
  own kernels     the same in every environment (their results depend on the shapes alone, not
                  on the ISA copy that runs);
  pinned threads  the same for 1 and 2 OpenMP threads of the process (one thread per replica is
                  set); across oneDNN's instruction sets not promised (its kernels differ), so an
                  AVX-512 machine's default run may differ from its AVX2 run, and that is
                  reported, not failed;
  thread-invariant  the same for 1 and 2 OpenMP threads, which are the replica's own here (cpu:1,
                  default threads, SPMD_THREAD_INVARIANT's kernels): another thread count per
                  replica, the same bits;
and both ResNet-18 workloads the same with our kernels' portable code as with their widest, the
variants taken in the list's order (SPMD_KERNEL_TIMING=0) in both.

usage: drift_bits.py SPMD_UNIT_TESTS SCRATCH_DIR
"""
import os
import subprocess
import sys

ENVIRONMENTS = {
    "omp1": {"OMP_NUM_THREADS": "1"},
    "omp2": {"OMP_NUM_THREADS": "2"},
    "avx2": {"OMP_NUM_THREADS": "2", "ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2",
             "SPMD_MAX_CPU_ISA": "avx2"},
    # Our own kernels' portable code against their widest, the kernels chosen in the list's order
    # (timing may choose others where the ISA changes their speed, and so other bits).
    "untimed": {"OMP_NUM_THREADS": "2", "SPMD_KERNEL_TIMING": "0"},
    "portable": {"OMP_NUM_THREADS": "2", "SPMD_KERNEL_TIMING": "0", "SPMD_MAX_CPU_ISA": "portable"},
}


def main():
    binary, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    bits = {}
    for name, extra in ENVIRONMENTS.items():
        path = os.path.join(scratch, "drift_bits_%s.txt" % name)
        if os.path.exists(path):
            os.remove(path)
        env = dict(os.environ, SPMD_DRIFT_BITS=path, **extra)
        env.pop("SPMD_THREADS_PER_REPLICA", None)
        p = subprocess.run([binary, "--gtest_filter=DriftBitsTest.*"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stdout)
            print("FAIL: DriftBitsTest under %s exited %d" % (name, p.returncode))
            return 1
        with open(path) as f:
            bits[name] = dict(line.rsplit(" ", 1) for line in f.read().splitlines())
        print("%s: %s" % (name, bits[name]))
    failed = False
    for workload, envs in [("own kernels", ["omp1", "omp2", "avx2", "untimed", "portable"]),
                           ("pinned threads", ["omp1", "omp2"]), ("pinned threads", ["untimed", "portable"]),
                           ("thread-invariant", ["omp1", "omp2"]), ("thread-invariant", ["untimed", "portable"])]:
        values = {e: bits[e][workload] for e in envs}
        if len(set(values.values())) != 1:
            print("FAIL: %s: the bits differ between %s" % (workload, values))
            failed = True
        else:
            print("%s: the same bits under %s" % (workload, ", ".join(envs)))
    same = bits["avx2"]["pinned threads"] == bits["omp2"]["pinned threads"]
    print("pinned threads, AVX2 against this machine's default ISA: %s (not promised)" %
          ("the same bits" if same else "other bits"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
