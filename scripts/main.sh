#!/usr/bin/env bash
# The main job: set up, build, and train ResNet-18 on Fashion-MNIST data-parallel on 2 emulated
# CPU devices (the sample's defaults; any sample flag can be appended, see --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
"${BUILD_DIR:-$root/build}/samples/resnet18_fashion_mnist/resnet18_fashion_mnist" "$@"
