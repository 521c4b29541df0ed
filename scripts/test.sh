#!/usr/bin/env bash
# Set up, build, and run every test: GoogleTest suites and the lit/FileCheck IR tests, via ctest.
# Completes what scripts/main.sh left out (the tests' packages, the tests and benchmarks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
phases_prefix=test
source "$root/scripts/phases.sh"
phase "packages" bash "$root/scripts/setup.sh" all
# CI builds a fresh clone once: its libraries as unity builds (8 files a unit, as the sanitizer
# builds: scripts/asan.sh), which parse the MLIR and oneDNN headers once a unit; a developer's
# build keeps a file a unit, so that an edit recompiles one file.
unity=()
[[ -n ${CI:-} ]] && unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
phase "build" bash "$root/scripts/build.sh" -DSPMD_BUILD_TESTS=ON -DSPMD_BUILD_BENCHMARKS=ON "${unity[@]}"
# ctest runs a test per core, each with OpenMP threads: libgomp's threads spin while they wait,
# taking the cores from the other test's threads. Sleeping instead (OMP_WAIT_POLICY=PASSIVE)
# ran 51 of the suites' heaviest tests in 28-30 s instead of 52-56 (2026-12-03, ctest -j2, 2
# cores, Zen 3; under ASan 63 against 125 s: scripts/asan.sh). The whole release ctest passed so.
phase "tests" env OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}" ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}"
phases_total
