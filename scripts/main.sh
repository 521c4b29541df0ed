#!/usr/bin/env bash
# The main job: set up, build, and train ResNet-18 on Fashion-MNIST data-parallel on 2 emulated
# CPU devices (the sample's defaults; any sample flag can be appended, see --help). Installs and
# builds only what the sample needs (scripts/test.sh adds the tests' packages and targets later)
# and prints the time of each phase.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
phases_prefix=main
source "$root/scripts/phases.sh"
phase "packages" bash "$root/scripts/setup.sh" core
# A build directory configured by test.sh keeps its tests; a new one gets the library and samples.
options=()
[[ -f $build/build.ninja ]] || options=(-DSPMD_BUILD_TESTS=OFF -DSPMD_BUILD_BENCHMARKS=OFF)
phase "build" env TARGETS=resnet18_fashion_mnist bash "$root/scripts/build.sh" "${options[@]}"
phase "training" "$build/samples/resnet18_fashion_mnist/resnet18_fashion_mnist" "$@"
phases_total
