#!/usr/bin/env bash
# Installs the Debian packages spmd needs. `setup.sh core` (scripts/main.sh): what building the
# library, the tools and the samples and running them needs (gnuplot draws the sample's
# metrics.png); `setup.sh` or `setup.sh all` (scripts/test.sh): that plus what the tests and
# benchmarks need. Idempotent: packages already present are skipped, so a warm machine pays only
# for the dpkg query.
set -euo pipefail
set_name=${1:-all}

core=(
  cmake ninja-build ccache g++ pkg-config
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools libzstd-dev
  libdnnl-dev zlib1g-dev libboost-context-dev nlohmann-json3-dev libcli11-dev
  libopenmpi-dev openmpi-bin dataset-fashion-mnist gnuplot-nox libdlpack-dev
)
# Tests (GoogleTest, lit's python3, PyTorch as the outside reference, clang for the sanitizers
# and fuzzers, the multi-host and package checks' tools) and benchmarks (Google Benchmark).
# Debian's PyTorch calls libblas.so.3 for its matmuls, which without OpenBLAS is the reference
# BLAS (2026-12-02, 2 Zen 4 cores: a decoder block's step 5.2 s against 0.20 s): OpenBLAS's
# OpenMP build takes that name through update-alternatives, so the comparisons meet a fair PyTorch.
testing=(
  libgtest-dev libgmock-dev libbenchmark-dev python3 python3-torch libtorch-dev libopenblas0-openmp
  clang libclang-rt-dev util-linux iproute2 graphviz dpkg-dev file
)
case $set_name in
  core) packages=("${core[@]}") ;;
  all) packages=("${core[@]}" "${testing[@]}") ;;
  *) echo "setup.sh: unknown package set '$set_name' (core or all)" >&2; exit 2 ;;
esac

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
  echo "setup: all ${#packages[@]} packages ($set_name) present"
fi
