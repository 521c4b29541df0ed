#!/usr/bin/env bash
# The main job: set up, build, and run the ResNet-18 sample (forward pass on the CPU backend).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
"${BUILD_DIR:-$root/build}/samples/resnet18/resnet18" "$@"
