#!/usr/bin/env bash
# ThreadSanitizer run of the threaded tests (replica threads, communicator, pmap, the data
# loader's prefetch thread, one compiled function called from several threads): builds the unit tests with -fsanitize=thread into build-tsan/
# (BUILD_DIR overrides) and runs those suites.
# OpenMP is pinned to one thread per process and oneDNN's process-wide primitive cache is
# turned off: neither libgomp nor libdnnl is TSan-instrumented, so the synchronisation inside
# them (gomp barriers, the cache's futures) is invisible to TSan and would be reported as races.
# Everything of ours (replica threads, communicator, executors, kernels) is instrumented.
# The simulator's emulated GPU blocks run each thread as a fiber, which TSan tracks as a thread
# of its own: every fiber switch costs it a clock exchange over all of them, so the two longest
# sim runs (SpmdEquivalenceSimTest and the donation test on sim, 100 s and more here) stay in the
# release and ASan runs; the other sim tests and BlockEmulatorTest run here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-tsan}
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DSPMD_ENABLE_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread"
fi
cmake --build "$build" --target spmd_threaded_tests --parallel "${JOBS:-$(nproc)}"
export OMP_NUM_THREADS=1 DNNL_PRIMITIVE_CACHE_CAPACITY=0 ONEDNN_PRIMITIVE_CACHE_CAPACITY=0
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
"$build/tests/spmd_threaded_tests" \
  --gtest_filter='Pmap*:*SpmdEquivalence*:Communicator*:CollectiveGradCheck*:Loader*:Concurrency*:*Conformance*:SimDevice*:BlockEmulator*:-SpmdEquivalenceSimTest.*:*Donated*sim*'
echo "ThreadSanitizer: threaded tests clean"
