#!/usr/bin/env bash
# Set up, build, and run every test: GoogleTest suites and the lit/FileCheck IR tests, via ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 -j "${JOBS:-$(nproc)}"
