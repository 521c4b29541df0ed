#!/usr/bin/env bash
# Set up, build, and run every test: GoogleTest suites and the lit/FileCheck IR tests, via ctest.
# Completes what scripts/main.sh left out (the tests' packages, the tests and benchmarks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
phases_prefix=test
source "$root/scripts/phases.sh"
phase "packages" bash "$root/scripts/setup.sh" all
phase "build" bash "$root/scripts/build.sh" -DSPMD_BUILD_TESTS=ON -DSPMD_BUILD_BENCHMARKS=ON
phase "tests" ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}"
phases_total
