#!/usr/bin/env bash
# Installs every Debian package spmd needs to build, test and benchmark. Idempotent: packages
# already present are skipped, so a warm machine pays only for the dpkg query.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ pkg-config
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools libzstd-dev
  libdnnl-dev zlib1g-dev libboost-context-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev gnuplot-nox dataset-fashion-mnist python3 python3-torch
  clang libclang-rt-dev util-linux
  libopenmpi-dev openmpi-bin iproute2 graphviz libcli11-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present"
fi
