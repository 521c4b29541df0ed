#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + coverage) into build-fuzz/ (BUILD_DIR
# overrides) and runs each: first every seed and regression input, then FUZZ_SECONDS seconds
# (default 20) of fuzzing. New crashes, and a fuzzer exiting non-zero for any reason, stop the
# script; copy a crash file into fuzz/regressions/<target>/ once fixed. FUZZ_SECONDS=0 only
# replays. New inputs accumulate in FUZZ_CORPUS_DIR (default ~/.cache/spmd-fuzz).
# The sources build as unity units (8 files a unit, as in scripts/asan.sh): 105 -> 78 s from nothing
# (2026-12-03, 2 cores, Zen 3; the generated op definitions a unit of their own, ir/CMakeLists.txt).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-20}
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -g -O1"
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_FUZZ=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DSPMD_ENABLE_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
fi
targets=(fuzz_idx fuzz_safetensors fuzz_program_file fuzz_fused_body fuzz_spmd_ir)
cmake --build "$build" --target "${targets[@]}" --parallel "${JOBS:-$(nproc)}"
# allow_user_poisoning=0: LLVM's allocator headers, compiled into our instrumented code, poison a
# BumpPtrAllocator slab's free part, and libMLIR.so (not instrumented) then allocates from that
# slab without unpoisoning it: a false use-after-poison (found by fuzz_spmd_ir parsing a
# #spmd.reduction attribute and then a string attribute). Real heap errors are still caught.
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=0:allow_user_poisoning=0:${ASAN_OPTIONS:-}"
# New inputs the fuzzers find are kept in a corpus outside the clone, so that runs on the same
# machine (or a CI cache of this directory) build on each other.
corpus=${FUZZ_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spmd-fuzz}
# The targets run side by side, one a core (each fuzzer is one process on one thread, so each gets
# its FUZZ_SECONDS of a core as when they ran one after another); their reports print in order.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fuzz_one() {
  local t=$1 inputs=() status=0
  for d in "$root/fuzz/corpus/$t" "$root/fuzz/regressions/$t"; do [[ -d $d ]] && inputs+=("$d"); done
  # The IR fuzzer starts from every lit test's IR (read only: new inputs go to the kept corpus).
  [[ $t == fuzz_spmd_ir ]] && inputs+=("$root/tests/lit/dialect" "$root/tests/lit/passes")
  # -rss_limit_mb: an input that makes a reader allocate without bound is a finding too.
  local budget=(-max_total_time="$seconds")
  ((seconds > 0)) || budget=(-runs=0)  # replay the inputs only
  "$build/fuzz/$t" -rss_limit_mb=2048 -timeout=10 "${budget[@]}" -print_final_stats=1 \
    -artifact_prefix="$work/$t/" "$corpus/$t" "${inputs[@]}" > "$work/$t/log" 2>&1 || status=$?
  echo "$status" > "$work/$t/status"
}
jobs_at_once=${JOBS:-$(getconf _NPROCESSORS_ONLN)}
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t" "$work/$t"
  echo "fuzz: $t (${seconds}s, corpus $corpus/$t: $(find "$corpus/$t" -type f | wc -l) kept inputs)"
  while (($(jobs -rp | wc -l) >= jobs_at_once)); do wait -n || true; done
  fuzz_one "$t" &
done
wait
for t in "${targets[@]}"; do
  echo "== fuzz: $t"
  grep -E "stat::number_of_executed_units|Done|ERROR|SUMMARY" "$work/$t/log" || true
  if compgen -G "$work/$t/crash-*" > /dev/null || compgen -G "$work/$t/oom-*" > /dev/null || compgen -G "$work/$t/timeout-*" > /dev/null; then
    kept=$(mktemp -d)
    cp "$work/$t"/crash-* "$work/$t"/oom-* "$work/$t"/timeout-* "$kept/" 2>/dev/null || true
    echo "fuzz: $t found a failing input: $(ls "$kept"/*)"
    exit 1
  fi
  # The fuzzer's own verdict: a binary that does not start, or stops for any other reason, fails.
  status=$(cat "$work/$t/status" 2>/dev/null || echo "no status")
  if [[ $status != 0 ]]; then
    echo "fuzz: $t exited $status:"
    tail -n 30 "$work/$t/log"
    exit 1
  fi
  if ! grep -q "stat::number_of_executed_units" "$work/$t/log"; then
    echo "fuzz: $t ran no inputs:"
    tail -n 30 "$work/$t/log"
    exit 1
  fi
done
echo "fuzz: all targets clean"
