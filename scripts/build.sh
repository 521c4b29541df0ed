#!/usr/bin/env bash
# Configures and builds spmd with CMake + Ninja into build/ (BUILD_DIR overrides). Arguments are
# CMake options for the configure step (run on the first build and whenever options are given,
# e.g. -DSPMD_BUILD_TESTS=OFF); TARGETS (space-separated) builds only those targets and what
# they need, otherwise everything configured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
if [[ ! -f $build/build.ninja || $# -gt 0 ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
fi
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" --parallel "${JOBS:-$(nproc)}" "${targets[@]}"
