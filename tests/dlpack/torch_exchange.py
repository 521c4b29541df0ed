#!/usr/bin/env python3
"""PyTorch and spmd exchange tensors through DLPack in one process (spmd's side:
frontend/io/DLPack.h, reached through tests/dlpack/TorchExchange.cpp by ctypes): zero-copy both
ways (the same data address), values and dtypes round-trip (float32, float64, bfloat16, int32),
memory stays valid across the hand-over (each side's deleter runs when the other lets go), and a
non-contiguous or CUDA-less misuse is refused without consuming the capsule.

Then the same with values on spmd's devices (--devices, default cpu:1): PyTorch's tensors on the
matching torch device (cuda:N for cuda:N) go into a call on those devices (a CUDA tensor is bound
in place, not copied) and the call's result comes out at the address of spmd's buffer. The GPU
report (scripts/gpu_bundle.sh) runs it with --devices cuda:0 and the GPU machine's CUDA PyTorch.

usage: torch_exchange.py LIBRARY [--devices cpu:1|cuda:N] [--library-path DIRS]"""
import argparse
import ctypes
import gc
import os
import re
import sys

import torch
import torch.utils.dlpack as dlpack

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("library", help="the built libspmd_torch_exchange.so")
parser.add_argument("--devices", default="cpu:1", help="spmd's devices for the values part: cpu:1 or cuda:N")
parser.add_argument("--library-path", default="",
                    help="colon-separated folders to load the library's dependencies from when this process "
                         "does not have them (the GPU bundle's lib/ and CUDA's), instead of LD_LIBRARY_PATH, "
                         "which would put them before PyTorch's own")
args = parser.parse_args()
if args.devices != "cpu:1" and not args.devices.startswith("cuda:"):
    sys.exit(f"torch_exchange: --devices must be cpu:1 or cuda:N, got {args.devices!r}")
torch_device = args.devices if args.devices.startswith("cuda:") else "cpu"
if torch_device != "cpu" and not torch.cuda.is_available():
    sys.exit(f"torch_exchange: --devices {args.devices} needs PyTorch with CUDA; torch {torch.__version__} has none here")



def load(path, folders, loading=()):
    """ctypes.CDLL(path), first loading each dependency the loader cannot find from `folders`
    (by its file name, so that PyTorch's copies, already loaded, still serve their sonames)."""
    while True:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            missing = re.match(r"(\S+?): cannot open shared object file", str(e))
            name = missing and os.path.basename(missing.group(1))
            found = [os.path.join(f, name) for f in folders if name and os.path.isfile(os.path.join(f, name))]
            if not found or name in loading:
                raise
            load(found[0], folders, loading + (name,))


lib = load(args.library, [f for f in args.library_path.split(":") if f])
lib.spmd_export.restype = ctypes.c_void_p
lib.spmd_export.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]
lib.spmd_export_value.restype = ctypes.c_void_p
lib.spmd_export_value.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]
lib.spmd_import.restype = ctypes.c_void_p
lib.spmd_import.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
lib.spmd_import_value.restype = ctypes.c_void_p
lib.spmd_import_value.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double),
                                  ctypes.POINTER(ctypes.c_int)]
lib.spmd_error.restype = ctypes.c_char_p
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
capsule_pointer.restype = ctypes.c_void_p
capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_rename = ctypes.pythonapi.PyCapsule_SetName
capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

DTYPES = [(0, torch.float32), (1, torch.float64), (2, torch.bfloat16), (3, torch.int32)]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def to_spmd(capsule, devices=None):
    """Hands a "dltensor" capsule to spmd as the protocol says: spmd takes it over (the capsule
    is renamed "used_dltensor") only when its import succeeds. Without `devices` as an array
    (spmd_import): its address and sum; with them as a value doubled by a call there
    (spmd_import_value): its address, the result's sum and the arguments bound in place."""
    if not capsule_valid(capsule, b"dltensor"):
        raise RuntimeError("the capsule was consumed already (a DLPack capsule is used once)")
    total, in_place = ctypes.c_double(), ctypes.c_int(-1)
    pointer = capsule_pointer(capsule, b"dltensor")
    if devices is None:
        address = lib.spmd_import(pointer, ctypes.byref(total))
    else:
        address = lib.spmd_import_value(pointer, devices.encode(), ctypes.byref(total), ctypes.byref(in_place))
    if not address:
        raise RuntimeError(lib.spmd_error().decode())
    capsule_rename(capsule, b"used_dltensor")
    if devices is not None and lib.spmd_error():  # taken over, but the call on it failed
        raise RuntimeError(f"the call on {devices} failed: {lib.spmd_error().decode()}")
    return (address, total.value) if devices is None else (address, total.value, in_place.value)


def expected_values(dtype, n):
    """What spmd_export writes (spmd_export_value: twice that, int32 as it is)."""
    return (torch.arange(n) * 3 - 7) if dtype == torch.int32 else (torch.arange(n, dtype=torch.float64) * 0.5 - 3)


for code, dtype in DTYPES:
    # PyTorch -> spmd: spmd reads torch's memory in place.
    t = (torch.arange(12) * 3 - 5).to(dtype).reshape(3, 4)
    capsule = dlpack.to_dlpack(t)
    address, total = to_spmd(capsule)
    check(address == t.data_ptr(), f"{dtype}: spmd's array is not torch's memory")
    check(total == float(t.double().sum()), f"{dtype}: spmd summed {total}, torch {float(t.double().sum())}")
    try:
        to_spmd(capsule)
        check(False, f"{dtype}: a consumed capsule was taken twice")
    except RuntimeError as e:
        check("consumed already" in str(e), f"{dtype}: {e}")
    # spmd -> PyTorch: torch reads spmd's memory in place and frees it when done.
    data = ctypes.c_void_p()
    managed = lib.spmd_export(code, 10, ctypes.byref(data))
    u = dlpack.from_dlpack(capsule_new(managed, b"dltensor", None))
    check(u.dtype == dtype, f"{dtype}: torch sees {u.dtype}")
    check(u.data_ptr() == data.value, f"{dtype}: torch's tensor is not spmd's memory")
    check(torch.equal(u.double(), expected_values(dtype, 10).double()), f"{dtype}: torch read {u.tolist()}")
    del u
    gc.collect()

# spmd lets go of what it imported: torch's deleters run, and torch's tensors stay valid.
survivor = torch.arange(5, dtype=torch.float32)
address, _ = to_spmd(dlpack.to_dlpack(survivor))
check(lib.spmd_release() == len(DTYPES) + 1, "spmd kept another number of arrays")
check(survivor.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0], "torch's tensor changed after spmd let it go")

# Misuse: a transposed (non-contiguous) tensor is refused and its capsule stays usable.
transposed = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
capsule = dlpack.to_dlpack(transposed)
try:
    to_spmd(capsule)
    check(False, "a non-contiguous tensor was taken")
except RuntimeError as e:
    check("is not row-major contiguous" in str(e) and ".contiguous()" in str(e), f"non-contiguous: {e}")
check(capsule_valid(capsule, b"dltensor"), "a refused capsule was consumed")
check(torch.equal(dlpack.from_dlpack(capsule), transposed), "the refused capsule no longer gives torch its tensor")
# An unsupported dtype: uint8.
try:
    to_spmd(dlpack.to_dlpack(torch.zeros(3, dtype=torch.uint8)))
    check(False, "a uint8 tensor was taken")
except RuntimeError as e:
    check("uint8 has no spmd dtype" in str(e), f"uint8: {e}")

# Values on spmd's devices: torch's tensor (on torch_device) goes into a call on args.devices
# (doubled; int32 passed through), and the call's result comes out to torch where spmd left it.
for code, dtype in DTYPES:
    where = f"{dtype} on {args.devices}"
    t = (torch.arange(12) * 3 - 5).to(dtype).reshape(3, 4).to(torch_device)
    if torch_device != "cpu":
        torch.cuda.synchronize()  # DLPack 0.6 carries no stream: torch's writes are done first
    capsule = dlpack.to_dlpack(t)
    try:
        address, total, in_place = to_spmd(capsule, args.devices)
    except RuntimeError as e:
        check(False, f"{where}: spmd refused torch's tensor: {e}")
        continue
    check(address == t.data_ptr(), f"{where}: spmd's value is not torch's memory")
    factor = 1 if dtype == torch.int32 else 2  # the call doubles floating-point values
    check(total == factor * float(t.double().sum()), f"{where}: spmd's call summed {total}, torch {factor * float(t.double().sum())}")
    if torch_device != "cpu":
        check(in_place == 1, f"{where}: the call copied torch's GPU tensor ({in_place} arguments bound in place)")
    check(not capsule_valid(capsule, b"dltensor"), f"{where}: the capsule was not consumed")
    data = ctypes.c_void_p()
    managed = lib.spmd_export_value(args.devices.encode(), code, 10, ctypes.byref(data))
    if not managed:
        check(False, f"{where}: spmd could not export its call's result: {lib.spmd_error().decode()}")
        continue
    u = dlpack.from_dlpack(capsule_new(managed, b"dltensor", None))
    check(u.dtype == dtype, f"{where}: torch sees {u.dtype}")
    check(u.device == torch.device(torch_device), f"{where}: torch sees it on {u.device}")
    check(u.data_ptr() == data.value, f"{where}: torch's tensor is not spmd's buffer")
    check(torch.equal(u.cpu().double(), factor * expected_values(dtype, 10).double()), f"{where}: torch read {u.tolist()}")
    del u, t
    gc.collect()
check(lib.spmd_release() == len(DTYPES), f"spmd kept another number of values on {args.devices}")
# A non-contiguous tensor on that device is refused, and its capsule stays usable.
transposed = torch.arange(6, dtype=torch.float32).reshape(2, 3).t().to(torch_device)
capsule = dlpack.to_dlpack(transposed)
try:
    to_spmd(capsule, args.devices)
    check(False, f"a non-contiguous tensor on {torch_device} was taken")
except RuntimeError as e:
    check("is not row-major contiguous" in str(e), f"non-contiguous on {torch_device}: {e}")
check(capsule_valid(capsule, b"dltensor"), f"a refused capsule on {torch_device} was consumed")

if failures:
    sys.exit("torch_exchange: " + "; ".join(failures))
print(f"torch {torch.__version__} and spmd exchanged {len(DTYPES)} dtypes both ways through DLPack without a copy, "
      f"as arrays and as values of calls on {args.devices}")
