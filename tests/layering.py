#!/usr/bin/env python3
"""The project's layers, checked against every #include in the tree (as LLVM's and Bazel's
layering checks do), and the file paths the docs name, checked against the tree.

A folder may include its own files and those of the layers LAYERS lists for it, nothing else;
a source folder missing from LAYERS is an error too, so a new folder must declare its place.
Run: python3 tests/layering.py [ROOT]; exits 1 naming every include that breaks a rule.
"""
import os
import pathlib
import re
import sys
import tempfile

# Layer -> what it may include besides itself. The runtime's order: base -> program -> device ->
# (kernels, mpi) -> exec -> backends; a backend builds on the kernel library and, for the CPU's
# own and the simulator's library ops, on the reference and CPU backends below it.
# The compiler half (ir, passes, compiler) shares only the schema with the runtime: base and
# program. "mlir" stands for the MLIR and LLVM headers, which no runtime folder may use.
RUNTIME_CORE = ["runtime/base", "runtime/program", "runtime/device"]
LAYERS = {
    "runtime/base": [],
    "runtime/program": ["runtime/base"],
    "runtime/device": ["runtime/base", "runtime/program"],
    "runtime/kernels": RUNTIME_CORE,
    "runtime/mpi": RUNTIME_CORE,
    "runtime/exec": RUNTIME_CORE + ["runtime/mpi"],
    "runtime/reference": RUNTIME_CORE,
    "runtime/cpu": RUNTIME_CORE + ["runtime/kernels", "runtime/reference", "runtime/mpi"],
    "runtime/sim": RUNTIME_CORE + ["runtime/kernels", "runtime/cpu"],
    "runtime/cuda": RUNTIME_CORE + ["runtime/kernels", "runtime/mpi"],
    "ir": ["runtime/base", "runtime/program", "mlir"],
    "passes": ["ir", "runtime/base", "runtime/program", "mlir"],
    "compiler": ["ir", "passes", "runtime/base", "runtime/program", "mlir"],
    "frontend": ["ir", "passes", "compiler", "mlir", "runtime/exec", "runtime/mpi"] + RUNTIME_CORE,
}
# Folders above every layer: they may include anything.
TOP = {"tools", "tests", "benchmarks", "samples", "fuzz", "cmake"}
SOURCE = {".h", ".cpp", ".cu", ".cuh", ".inc", ".td"}
INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]', re.M)


def layer_of_file(rel: str):
    parts = rel.split("/")
    if parts[0] == "runtime" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def layer_of_include(path: str):
    parts = path.split("/")
    if parts[0] in ("mlir", "llvm"):
        return "mlir"
    if parts[0] == "runtime" and len(parts) > 2:
        return "/".join(parts[:2])
    if parts[0] == "runtime" and len(parts) == 2:
        return "runtime/base"  # generated from base headers (ElementwiseSource.inc)
    if parts[0] in LAYERS or parts[0] in TOP:
        return parts[0]
    return None  # a system or third-party header outside MLIR


def check_includes(root: pathlib.Path):
    errors = []
    for file in sorted(root.rglob("*")):
        rel = file.relative_to(root).as_posix()
        if file.suffix not in SOURCE or rel.startswith(("build", ".")) or "/build" in rel:
            continue
        layer = layer_of_file(rel)
        if layer in TOP:
            continue
        if layer not in LAYERS:
            errors.append(f"{rel}: folder '{layer}' has no place in tests/layering.py's LAYERS; declare what it may include")
            continue
        text = file.read_text(errors="replace")
        for match in INCLUDE.finditer(text):
            included = match.group(1)
            if included.startswith((".", "/")) or "/../" in included or "/./" in included:
                # Relative to the including file: judged by where it lands in the tree.
                landed = os.path.normpath(os.path.join(os.path.dirname(rel), included))
                if landed.startswith("..") or os.path.isabs(landed):
                    line = text.count("\n", 0, match.start()) + 1
                    errors.append(f"{rel}:{line}: includes '{included}', which leaves the source tree")
                    continue
                included = landed
            target = layer_of_include(included)
            if target is None or target == layer or target in LAYERS[layer]:
                continue
            line = text.count("\n", 0, match.start()) + 1
            errors.append(f"{rel}:{line}: includes '{match.group(1)}', but {layer} may include only "
                          f"{', '.join(LAYERS[layer]) or 'nothing outside itself'} (layer {target})")
    return errors


# A path in backquotes in the docs (`runtime/cpu/Conv.cpp`, `passes/CMakeLists.txt`, or a
# class's files `runtime/base/AtomicFile`): it must exist.
DOC_PATH = re.compile(r"`((?:runtime|ir|passes|compiler|frontend|tools|tests|benchmarks|samples|fuzz|scripts|cmake|docs)/[A-Za-z0-9_./-]+)`")


def check_doc_paths(root: pathlib.Path):
    errors = []
    for doc in ("README.md", "docs/ARCHITECTURE.md", "docs/BENCHMARKS.md"):
        text = (root / doc).read_text()
        for match in DOC_PATH.finditer(text):
            path = match.group(1).rstrip(".")
            if "*" in path or "<" in path or any((root / (path + ext)).exists() for ext in ("", ".h", ".cpp")):
                continue
            line = text.count("\n", 0, match.start()) + 1
            errors.append(f"{doc}:{line}: names `{path}`, which is not in the tree")
    return errors


def self_test():
    """The rules on a tree made for them: a relative include that climbs into a higher layer is
    caught as the plain one is (before, "../" includes were skipped)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "runtime/base").mkdir(parents=True)
        (root / "runtime/exec").mkdir(parents=True)
        (root / "runtime/exec/Executor.h").write_text("")
        (root / "runtime/base/Plain.h").write_text('#include "runtime/exec/Executor.h"\n')
        (root / "runtime/base/Relative.h").write_text('#include "../exec/Executor.h"\n#include "./Plain.h"\n')
        (root / "runtime/base/Outside.h").write_text('#include "../../../elsewhere.h"\n')
        errors = check_includes(root)
    expected = ["runtime/base/Outside.h:1: includes '../../../elsewhere.h', which leaves the source tree",
                "runtime/base/Plain.h:1: includes 'runtime/exec/Executor.h'",
                "runtime/base/Relative.h:1: includes '../exec/Executor.h', but runtime/base"]
    if len(errors) != len(expected) or not all(e.startswith(x) for e, x in zip(errors, expected)):
        print("layering self-test failed; got:\n  " + "\n  ".join(errors))
        return False
    return True


def main():
    if not self_test():
        return 1
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
    errors = check_includes(root) + check_doc_paths(root)
    for error in errors:
        print(error)
    if errors:
        print(f"layering: {len(errors)} problem(s)")
        return 1
    print("layering: every include follows the layers, every path the docs name exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
