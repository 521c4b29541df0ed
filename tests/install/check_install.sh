#!/usr/bin/env bash
# Installs spmd from BUILD into a temporary prefix, then configures, builds and runs the outside
# project in tests/install/project against it (find_package(spmd CONFIG REQUIRED), spmd::spmd,
# RTTI on), as a user's CMake project would. Usage: check_install.sh BUILD SCRATCH
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
scratch=$2
rm -rf "$scratch"
mkdir -p "$scratch"
cmake --install "$build" --prefix "$scratch/prefix" > "$scratch/install.log"
test -f "$scratch/prefix/lib/cmake/spmd/spmdConfig.cmake"
test -f "$scratch/prefix/include/spmd/spmd.h"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$here/project" -B "$scratch/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$scratch/prefix"
cmake --build "$scratch/consumer"
"$scratch/consumer/consumer"
