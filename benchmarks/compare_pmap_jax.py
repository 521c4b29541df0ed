#!/usr/bin/env python3
"""ResNet-18 (reduced width) data-parallel training step on N emulated CPU devices: spmd's pmap
(Google Benchmark bench_resnet18_pmap_step) beside jax.pmap on XLA's emulated host devices, same
model, global batch, device count and optimizer, in one run; prints both step times and the ratio.

usage: python3 benchmarks/compare_pmap_jax.py [--build build] [--devices 4] [--reps 5] [--smoke]
--smoke (CI): width 2, global batch 4 on 2 devices, one repetition, XLA unoptimised; checks that
both sides run and the ratio prints; exits 77 (skipped) when the JAX environment cannot be
created (no PyPI).
The JAX side runs in a virtual environment this script creates on first use (pip install jax,
default ~/.cache/spmd/jax-venv; --venv to change). Step: forward with per-replica train-mode BN,
softmax cross-entropy, backward, pmean of gradients / loss / BN running stats, SGD momentum 0.9."""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_resnet18_forward import time_spmd  # noqa: E402

SKIPPED = 77  # ctest's SKIP_RETURN_CODE for the smoke run
# A smoke run checks that both sides run, not their speed: XLA's CPU backend unoptimised compiles
# the smoke step in about half the time (17 against 33 s on 2 cores, 2026-12-03), most of a smoke
# run's. Given to the JAX process as SPMD_SMOKE_XLA_FLAGS (jax_environment), which adds them to XLA_FLAGS.
SMOKE_XLA_FLAGS = "--xla_backend_optimization_level=0"


def ensure_venv(venv, smoke):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        print(f"creating {venv} with jax (first run only) ...", file=sys.stderr)
        made = subprocess.run([sys.executable, "-m", "venv", venv]).returncode == 0 and \
            subprocess.run([python, "-m", "pip", "install", "-q", "jax"]).returncode == 0
        if not made:
            print(f"could not create {venv} with jax (is PyPI reachable? python3-venv installed?)", file=sys.stderr)
            sys.exit(SKIPPED if smoke else 1)
    return python


JAX_STEP = r'''
import os, sys, time, json
devices, batch, width, reps = map(int, sys.argv[1:5])
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices} " + os.environ.get("SPMD_SMOKE_XLA_FLAGS", "")
import jax, jax.numpy as jnp
from jax import lax

def conv_init(key, cout, cin, k):
    return jax.random.normal(key, (cout, cin, k, k)) * (2.0 / (cin * k * k)) ** 0.5

def init(key):
    keys = iter(jax.random.split(key, 64))
    p, s = {}, {}
    def conv(name, cout, cin, k):
        p[name + ".weight"] = conv_init(next(keys), cout, cin, k); p[name + ".bias"] = jnp.zeros(cout)
    def bn(name, c):
        p[name + ".weight"] = jnp.ones(c); p[name + ".bias"] = jnp.zeros(c)
        s[name + ".running_mean"] = jnp.zeros(c); s[name + ".running_var"] = jnp.ones(c)
    conv("stem.conv", width, 1, 3); bn("stem.bn", width)
    cin = width
    for i in range(4):
        cout = width << i
        for b in range(2):
            n = f"stage{i + 1}.{b}"
            conv(n + ".conv1", cout, cin if b == 0 else cout, 3); bn(n + ".bn1", cout)
            conv(n + ".conv2", cout, cout, 3); bn(n + ".bn2", cout)
            if b == 0 and i > 0: conv(n + ".conv3", cout, cin, 1)
        cin = cout
    p["fc.weight"] = jax.random.normal(next(keys), (10, cin)) * 0.01; p["fc.bias"] = jnp.zeros(10)
    return p, s

def forward(p, s, x):
    new = {}
    def conv(name, x, stride, pad):
        y = lax.conv_general_dilated(x, p[name + ".weight"], (stride, stride), [(pad, pad)] * 2,
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p[name + ".bias"][None, :, None, None]
    def bn(name, x):
        mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
        n = x.size / x.shape[1]
        new[name + ".running_mean"] = 0.9 * s[name + ".running_mean"] + 0.1 * mean
        new[name + ".running_var"] = 0.9 * s[name + ".running_var"] + 0.1 * var * n / (n - 1)
        y = (x - mean[None, :, None, None]) * lax.rsqrt(var + 1e-5)[None, :, None, None]
        return y * p[name + ".weight"][None, :, None, None] + p[name + ".bias"][None, :, None, None]
    y = jax.nn.relu(bn("stem.bn", conv("stem.conv", x, 1, 1)))
    for i in range(4):
        for b in range(2):
            n, stride = f"stage{i + 1}.{b}", (2 if (b == 0 and i > 0) else 1)
            h = jax.nn.relu(bn(n + ".bn1", conv(n + ".conv1", y, stride, 1)))
            h = bn(n + ".bn2", conv(n + ".conv2", h, 1, 1))
            short = conv(n + ".conv3", y, stride, 0) if (b == 0 and i > 0) else y
            y = jax.nn.relu(h + short)
    y = y.mean((2, 3))
    return y @ p["fc.weight"].T + p["fc.bias"], new

def step(p, s, m, x, y):
    def loss_fn(q):
        logits, new = forward(q, s, x)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean(), new
    (loss, new), g = jax.value_and_grad(loss_fn, has_aux=True)(p)
    g, loss, new = lax.pmean((g, loss, new), "batch")
    m = jax.tree_util.tree_map(lambda a, b: 0.9 * a + b, m, g)
    p = jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, m)
    return p, new, m, loss

pstep = jax.pmap(step, axis_name="batch")
p, s = init(jax.random.PRNGKey(0))
m = jax.tree_util.tree_map(jnp.zeros_like, p)
rep = lambda t: jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (devices,) + a.shape), t)
p, s, m = rep(p), rep(s), rep(m)
x = jax.random.normal(jax.random.PRNGKey(1), (devices, batch // devices, 1, 28, 28))
y = (jnp.arange(batch) % 10).reshape(devices, batch // devices)
for _ in range(3):
    p, s, m, loss = pstep(p, s, m, x, y); loss.block_until_ready()
times = []
for _ in range(max(reps * 4, 10)):
    t = time.perf_counter(); p, s, m, loss = pstep(p, s, m, x, y); loss.block_until_ready()
    times.append(time.perf_counter() - t)
print(json.dumps({"ms": sorted(times)[len(times) // 2] * 1e3, "version": jax.__version__,
                  "devices": len(jax.devices())}))
'''


def jax_environment(smoke):
    """The JAX process's environment: SPMD_SMOKE_XLA_FLAGS for a smoke run, else this one's."""
    return dict(os.environ, SPMD_SMOKE_XLA_FLAGS=SMOKE_XLA_FLAGS) if smoke else None


def time_jax(python, devices, batch, width, reps, smoke):
    out = subprocess.run([python, "-c", JAX_STEP, str(devices), str(batch), str(width), str(reps)],
                         capture_output=True, text=True, env=jax_environment(smoke))
    if out.returncode != 0:
        sys.exit(f"the jax.pmap side failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--devices", type=int, default=4, choices=[1, 2, 4])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--venv", default=os.path.expanduser("~/.cache/spmd/jax-venv"))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    # Must match a registered bench_resnet18_pmap_step configuration.
    batch, width = (4, 2) if args.smoke else (64, 16)
    if args.smoke:
        args.devices, args.reps = 2, 1
    python = ensure_venv(args.venv, args.smoke)
    ours = time_spmd(args.build, f"BM_ResNet18PmapStep/devices:{args.devices}/batch:{batch}/width:{width}/",
                     args.reps, os.cpu_count(), "bench_resnet18_pmap_step", min_time=0.01 if args.smoke else 1)
    jax_result = time_jax(python, args.devices, batch, width, args.reps, args.smoke)
    theirs = jax_result["ms"]
    print(f"ResNet-18 width {width}, global batch {batch}, 1x28x28, per-replica BN, SGD momentum, "
          f"{args.devices} emulated CPU devices ({os.cpu_count()} cores)")
    print(f"  spmd pmap (cpu:{args.devices})           : {ours:8.2f} ms/step  {batch / ours * 1e3:8.1f} img/s")
    print(f"  jax.pmap {jax_result['version']} ({jax_result['devices']} host devices): "
          f"{theirs:8.2f} ms/step  {batch / theirs * 1e3:8.1f} img/s")
    print(f"  ratio spmd/JAX time               : {ours / theirs:8.3f}  (< 1 means spmd is faster)")
    if args.smoke:
        print(f"  (smoke: tiny sizes, XLA run with {SMOKE_XLA_FLAGS}; not a comparison)")


if __name__ == "__main__":
    main()
