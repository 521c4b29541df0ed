#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the whole test suite: builds the tests
# (and the tools and sample they run) with -fsanitize=address,undefined into build-asan/
# (BUILD_DIR overrides), CUDA off, and runs every test through ctest. Any report fails the run.
# Line tables only (-g1): reports keep file:line, and the build is ~20% faster than with -g.
# -O1 for the libraries, tools and samples (ASan's usual level): the build takes ~13% less than
# at -O2 (2026-11-29, 2 cores: 734 s against 801 s for the stage, the tests 208 s against 197 s).
# -Og for the test suites' own sources, which are most of this build's compile time and little of
# its run time (2026-12-01, 2 cores): a suite file compiles in 0.5-0.8 of its -O1 time (MeshTest,
# GradCheckTest, ProgramFileTest timed side by side), the suite in 620 s of CPU, and the tests ran
# 325 s against 309 s at -O1; -O0 compiled no faster than -Og and ran them in 401 s.
# -O0 for ir/SpmdDialect.cpp, the ODS-generated op definitions (SPMD_OP_DEFS_COMPILE_OPTIONS): the
# longest compile of this build at -O1 (92 s; -O0 42 s, 2026-12-03, 2 cores, Zen 3), code the
# tests run little of (op builders, accessors, the generated parsers and printers).
# UBSan checks the libraries, tools and samples, not the suites' own sources
# (-fno-sanitize=undefined there): its checks took ~40% of a suite file's compile (MeshTest:
# 17.4 s with them, 11.0 s with ASan alone, 2026-12-01), and what they would check is the test
# code's own arithmetic; every library call the tests make still runs UBSan's checks, and ASan
# still instruments both.
# UBSan's vptr check needs RTTI, which the project builds without (as LLVM does), so it is off.
# So are its null and alignment checks, here only: GCC puts them on every member access and
# reference binding, and they took ~45% of a library file's compile (runtime/program/
# ProgramFile.cpp: 35 s with them, 20 s without, 2026-12-02, 2 cores, Zen 3). ASan still stops
# at a null dereference, and the fuzz build (scripts/fuzz.sh: clang, -fsanitize=undefined whole)
# keeps both checks on every reader of outside bytes (IDX, safetensors, program files, fused
# bodies, IR text), where a misaligned or null access would come from.
# The libraries build as unity builds (CMAKE_UNITY_BUILD: 8 files a unit, the test suites one file
# a unit, tests/CMakeLists.txt): the MLIR and oneDNN headers are parsed once a unit instead of once
# a file. A file's own anonymous-namespace names must then not repeat another's of the same
# library (the build says "redefinition" or "ambiguous" where they do: rename one); a file with
# its own compile options builds alone. From nothing (no ccache), 2026-11-30, 2 cores: this
# script 932 s against 1086 s (its tests 289 s), scripts/tsan.sh 529 s against 707 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-asan}
flags="-fsanitize=address,undefined -fno-sanitize=vptr,null,alignment -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DSPMD_ENABLE_CUDA=OFF -DSPMD_TEST_COMPILE_OPTIONS='-Og;-fno-sanitize=undefined' -DSPMD_OP_DEFS_COMPILE_OPTIONS=-O0 \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
fi
cmake --build "$build" --target spmd_unit_tests --parallel "${JOBS:-$(nproc)}"
# allocator_may_return_null: an impossible allocation must reach our bad_alloc handling (tested).
# Leak checking is off: MLIR's and oneDNN's process-lifetime singletons are never freed.
# allow_user_poisoning=0: see scripts/fuzz.sh (LLVM's header allocator poisons, libMLIR.so does not
# unpoison: false reports).
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=0:abort_on_error=1:allow_user_poisoning=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
cd "$build"
# The drift_* reruns repeat suites of this run under other thread counts / ISAs, and the dist_*
# checks and the bench_* smoke runs start processes under mpirun (Open MPI is not instrumented,
# and their programs are not built here), and package_outside_project links an uninstrumented
# program against the instrumented libspmd.so, and readme_commands runs the README's programs
# and scripts (build/ paths), and torch_dlpack_exchange loads an instrumented module into an
# uninstrumented python3 (sample_libtorch_dlpack, likewise, runs LibTorch, and is not built
# here); the release build runs them all, so they are
# left out here. So is the full-width ResNet-18 against PyTorch: its f64 step runs the reference
# loops at 64 channels, 240 s under ASan (80% of this run's time on 2 cores), for the same loops
# the width-2..16 steps of the other suites run here; its numerics are the release run's.
# So is every kernel case on sim:4 (13 s here, 22 s in CI on 2026-12-02): the kernels of its sim:1
# case on the same stream-thread code once per replica (scripts/tsan.sh leaves it out too).
# OpenMP's threads sleep while they wait (scripts/test.sh says why): the two tests at a time share the cores.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} ctest --output-on-failure --timeout 1800 -j "${JOBS:-$(nproc)}" \
  -E '^(drift|dist|bench|package)_|^readme_commands$|^torch_dlpack_exchange$|^sample_libtorch_dlpack$|^TorchReferenceTest\.ResNet18FullWidthMatchesPyTorchAutograd$|^Backends/ConformanceTest\.EveryKernelMatchesTheReference/sim_4( |$)'

echo "ASan+UBSan: the whole suite is clean"
