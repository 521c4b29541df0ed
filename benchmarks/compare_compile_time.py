#!/usr/bin/env python3
"""Compile time of the full-width ResNet-18 training step: spmd::jit (bench_resnet18_train_step's
compile_s counter) beside jax.jit, each from the first call to the first finished step (trace,
passes or XLA's compile, lowering, primitive creation, one step), in fresh processes, one run
each side per repetition; prints both medians and the ratio (target: spmd <= 0.2x of JAX's). spmd
runs twice per repetition: with an empty kernel cache (its convolutions' variants timed during
the first call, runtime/device/Variants.h) and then with the choices that run kept (no timing).

usage: python3 benchmarks/compare_compile_time.py [--build build] [--reps 3] [--smoke]
--smoke (CI): batch 2, one repetition, XLA unoptimised; checks that both sides run and the ratio
prints; exits 77 (skipped) when the JAX environment cannot be created (no PyPI). The JAX side is the step of
compare_pmap_jax.py (same model, loss, SGD momentum), jitted on one device; it runs in the
virtual environment that script creates (~/.cache/spmd/jax-venv; --venv to change)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_pmap_jax import JAX_STEP, SMOKE_XLA_FLAGS, ensure_venv, jax_environment  # noqa: E402

# compare_pmap_jax's model and step, one device: no pmean (the identity there), jax.jit.
_MODEL = JAX_STEP[JAX_STEP.index("def conv_init"):JAX_STEP.index("pstep = jax.pmap")]
_MODEL = _MODEL.replace('    g, loss, new = lax.pmean((g, loss, new), "batch")\n', "")
JAX_COMPILE = r'''
import os, sys, time, json
batch, width = map(int, sys.argv[1:3])
# Only flags: XLA reads a value that does not start with "--" (" " when both are unset) as a file.
flags = " ".join(f for f in (os.environ.get("XLA_FLAGS", "").strip(), os.environ.get("SPMD_SMOKE_XLA_FLAGS", "").strip()) if f)
if flags:
    os.environ["XLA_FLAGS"] = flags
import jax, jax.numpy as jnp
from jax import lax
''' + _MODEL + r'''
p, s = init(jax.random.PRNGKey(0))
m = jax.tree_util.tree_map(jnp.zeros_like, p)
x = jax.random.normal(jax.random.PRNGKey(1), (batch, 1, 28, 28))
y = jnp.arange(batch) % 10
jax.block_until_ready((p, s, m, x, y))
start = time.perf_counter()
p, s, m, loss = jax.jit(step)(p, s, m, x, y)
loss.block_until_ready()
print(json.dumps({"s": time.perf_counter() - start, "version": jax.__version__}))
'''


def spmd_seconds(build, batch, kernel_cache):
    binary = os.path.join(build, "benchmarks", "bench_resnet18_train_step")
    if not os.path.exists(binary):
        sys.exit(f"missing {binary}: build first (bash scripts/build.sh)")
    name = f"BM_ResNet18TrainStep/batch:{batch}/plan:1/fuse:1/layouts:1/"
    env = dict(os.environ, SPMD_KERNEL_CACHE=kernel_cache)
    out = subprocess.run([binary, "--benchmark_filter=^" + name, "--benchmark_format=json",
                          "--benchmark_min_time=0.001"], check=True, capture_output=True, text=True, env=env)
    runs = [b for b in json.loads(out.stdout)["benchmarks"] if b["name"].startswith(name)]
    if not runs:
        sys.exit(f"bench_resnet18_train_step has no benchmark '{name}'")
    return runs[0]["compile_s"]


def jax_seconds(python, batch, width, smoke):
    out = subprocess.run([python, "-c", JAX_COMPILE, str(batch), str(width)], capture_output=True, text=True,
                         env=jax_environment(smoke))
    if out.returncode != 0:
        sys.exit(f"the jax.jit side failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/spmd/jax-venv"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    batch, width = (2, 64) if args.smoke else (64, 64)
    reps = 1 if args.smoke else max(args.reps, 1)
    python = ensure_venv(args.venv, args.smoke)
    timed, ours = [], []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as cache:
            timed.append(spmd_seconds(args.build, batch, cache))  # empty: every choice timed
            ours.append(spmd_seconds(args.build, batch, cache))   # the choices kept: none timed
    theirs = [jax_seconds(python, batch, width, args.smoke) for _ in range(reps)]
    version = theirs[0]["version"]
    their_runs = ", ".join(f"{run['s']:.2f}" for run in theirs)
    ours_s, theirs_s = statistics.median(ours), statistics.median(s["s"] for s in theirs)
    timed_s = statistics.median(timed)
    print(f"ResNet-18 width {width}, batch {batch}, 1x28x28, train-mode BN, SGD momentum: first call to first "
          f"finished step, median of {reps} fresh process(es) each ({os.cpu_count()} cores)")
    print(f"  spmd::jit, kernels timed : {timed_s:8.2f} s   ({', '.join(f'{v:.2f}' for v in timed)})")
    print(f"  spmd::jit, choices kept  : {ours_s:8.2f} s   ({', '.join(f'{v:.2f}' for v in ours)})")
    print(f"  jax.jit {version:16s} : {theirs_s:8.2f} s   ({their_runs})")
    print(f"  ratio spmd/JAX           : {timed_s / theirs_s:8.3f} timed, {ours_s / theirs_s:.3f} kept  (target <= 0.2)")
    if args.smoke:
        print(f"  (smoke: XLA run with {SMOKE_XLA_FLAGS}; not a comparison)")


if __name__ == "__main__":
    main()
