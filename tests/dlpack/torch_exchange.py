#!/usr/bin/env python3
"""PyTorch and spmd exchange tensors through DLPack in one process (spmd's side:
frontend/io/DLPack.h, reached through tests/dlpack/TorchExchange.cpp by ctypes): zero-copy both
ways (the same data address), values and dtypes round-trip (float32, float64, bfloat16, int32),
memory stays valid across the hand-over (each side's deleter runs when the other lets go), and a
non-contiguous or CUDA-less misuse is refused without consuming the capsule.

usage: torch_exchange.py LIBRARY"""
import ctypes
import gc
import sys

import torch
import torch.utils.dlpack as dlpack

lib = ctypes.CDLL(sys.argv[1])
lib.spmd_export.restype = ctypes.c_void_p
lib.spmd_export.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]
lib.spmd_import.restype = ctypes.c_void_p
lib.spmd_import.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
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


def to_spmd(capsule):
    """Hands a "dltensor" capsule to spmd as the protocol says: spmd takes it over (the capsule
    is renamed "used_dltensor") only when its import succeeds."""
    if not capsule_valid(capsule, b"dltensor"):
        raise RuntimeError("the capsule was consumed already (a DLPack capsule is used once)")
    total = ctypes.c_double()
    address = lib.spmd_import(capsule_pointer(capsule, b"dltensor"), ctypes.byref(total))
    if not address:
        raise RuntimeError(lib.spmd_error().decode())
    capsule_rename(capsule, b"used_dltensor")
    return address, total.value


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
    expected = (torch.arange(10) * 3 - 7) if dtype == torch.int32 else (torch.arange(10, dtype=torch.float64) * 0.5 - 3)
    check(torch.equal(u.double(), expected.double()), f"{dtype}: torch read {u.tolist()}")
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

if failures:
    sys.exit("torch_exchange: " + "; ".join(failures))
print(f"torch {torch.__version__} and spmd exchanged {len(DTYPES)} dtypes both ways through DLPack without a copy")
