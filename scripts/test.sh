#!/usr/bin/env bash
# Set up, build, and run every test: GoogleTest suites and the lit/FileCheck IR tests, via ctest.
# Completes what scripts/main.sh left out (the tests' packages, the tests and benchmarks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
phase() { echo "== test: $1 took $((SECONDS - $2)) s"; }
t=$SECONDS
bash "$root/scripts/setup.sh" all
phase "packages" "$t"
t=$SECONDS
bash "$root/scripts/build.sh" -DSPMD_BUILD_TESTS=ON -DSPMD_BUILD_BENCHMARKS=ON
phase "build" "$t"
t=$SECONDS
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}"
phase "tests" "$t"
echo "== test: $((SECONDS - start)) s in all"
