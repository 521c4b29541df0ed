#!/usr/bin/env bash
# ThreadSanitizer run of the threaded tests (replica threads, communicator, pmap, the data
# loader's prefetch thread, one compiled function called from several threads, values on a mesh
# read across replicas, custom ops on sim's stream thread): builds the unit tests with -fsanitize=thread into build-tsan/
# (BUILD_DIR overrides) and runs those suites. The libraries build as unity builds, as in
# scripts/asan.sh.
# OpenMP is pinned to one thread per process and oneDNN's process-wide primitive cache is
# turned off: neither libgomp nor libdnnl is TSan-instrumented, so the synchronisation inside
# them (gomp barriers, the cache's futures) is invisible to TSan and would be reported as races.
# Everything of ours (replica threads, communicator, executors, kernels) is instrumented.
# The simulator's emulated GPU blocks run each thread as a fiber, which TSan tracks as a thread
# of its own: every fiber switch costs it a clock exchange over all of them, so the two longest
# sim runs (SpmdEquivalenceSimTest and the donation test on sim, 100 s and more here) stay in the
# release and ASan runs, as does SimDeviceTest.TwoStageReductions... (every BatchNorm and reduce
# kernel case three times on the emulated blocks, one thread of its own); the other sim tests and
# BlockEmulatorTest run here. The kernel cases run on cpu:1 and sim:1 only: on cpu:4 and sim:4 the
# conformance test runs every case on each of the four devices again, the same kernels on the
# same stream-thread code (sim:4's took 96 s of the ~220 s one process took for all), and the
# replica threads' own code is what the other cpu:4 / sim:4 tests run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-tsan}
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DSPMD_ENABLE_CUDA=OFF -DSPMD_TEST_COMPILE_OPTIONS=-O1 \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
fi
cmake --build "$build" --target spmd_threaded_tests --parallel "${JOBS:-$(nproc)}"
export OMP_NUM_THREADS=1 DNNL_PRIMITIVE_CACHE_CAPACITY=0 ONEDNN_PRIMITIVE_CACHE_CAPACITY=0
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
filter='Pmap*:SharedValues*:*SpmdEquivalence*:Communicator*:CollectiveGradCheck*:Loader*:Concurrency*:*Conformance*:SimDevice*:BlockEmulator*:CustomOp*:Mesh*:-SpmdEquivalenceSimTest.*:*Donated*sim*:SimDeviceTest.TwoStageReductions*:*EveryKernelMatchesTheReference/cpu_4:*EveryKernelMatchesTheReference/sim_4'
# The suites run as one process per core (the shards share nothing but the kernel cache, which is
# written by rename). The training steps on sim (sim:4's 142 s and sim:1's 19 s) and the two f32
# equivalence cases (24 and 23 s) run in a process of their own, the rest (the sim:1 kernel cases'
# 139 s among them) as GoogleTest shards over the other cores. On 2 cores (2026-12-02, Zen 3, the
# two contending for the cores) the first process took 161 s and the other 257 s while the f32
# cases were the other's; moved, 167 s and 205 s (2026-12-03, a slower spell). GoogleTest's own
# sharding gave one shard sim:4's step and the sim:1 kernel cases together. Every process's log
# is printed.
cores=${JOBS:-$(getconf _NPROCESSORS_ONLN)}  # not nproc: it counts OMP_NUM_THREADS (1 here)
longest='Backends/ConformanceTest.TrainingStepMatchesTheCpuBackend/sim_*:Modes/SpmdEquivalenceTest.*F32'
runs=()  # filter, shard count, shard index
if ((cores > 1)); then
  runs+=("$longest" 1 0)
  for ((i = 0; i < cores - 1; ++i)); do runs+=("$filter:$longest" $((cores - 1)) "$i"); done
else
  runs+=("$filter" 1 0)
fi
shards=$((${#runs[@]} / 3))
logs=$(mktemp -d)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=${runs[3 * i + 1]} GTEST_SHARD_INDEX=${runs[3 * i + 2]} "$build/tests/spmd_threaded_tests" \
    --gtest_filter="${runs[3 * i]}" > "$logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failed+=("$i")
  echo "== ThreadSanitizer shard $i of $shards"
  cat "$logs/$i.log"
  # A filter (or a renamed suite) that leaves a shard nothing to run fails, not passes.
  if grep -q "Running 0 tests" "$logs/$i.log"; then echo "ThreadSanitizer: shard $i ran no test"; failed+=("$i"); fi
done
rm -rf "$logs"
if ((${#failed[@]})); then
  echo "ThreadSanitizer: shard(s) ${failed[*]} failed (their logs are above)"
  exit 1
fi
echo "ThreadSanitizer: threaded tests clean"
