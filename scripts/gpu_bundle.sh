#!/usr/bin/env bash
# Packs what the lent GPU machine needs into build/gpu-bundle (carry it with the device tool's
# `carry: ["build/gpu-bundle"]`): the test, sample, benchmark and spmd-run binaries built here
# (with nvcc), stripped, and every shared library they load that is not glibc, the C++ runtime
# or CUDA's own (LLVM, MLIR, oneDNN, Open MPI, Google Benchmark, ...), copied from this machine
# into one xz archive. Two of LLVM's dependencies are replaced by stubs that hold only their
# data symbols and version names: Z3 (LLVM's SMT solver, 23 MB) and libxml2 (with ICU, 33 MB;
# LLVM's Windows-manifest code), which nothing in spmd calls; a call would stop with "undefined
# symbol". There, `bash build/gpu-bundle/setup.sh` unpacks it, prefers the machine's own copy of
# every library it already has, finds cuDNN, NCCL, cuBLAS and NVRTC where that machine keeps them
# and says what still does not resolve; build/gpu-bundle/run runs a binary with those libraries,
# and build/gpu-bundle/report runs every GPU check in one go (one report file).
#
# The seeds' run (issue 50: full-width ResNet-18 on Fashion-MNIST, global batch 256 over
# cuda:0*2, lr 0.1, 10 epochs, beside PyTorch's same run on that GPU) needs the data too: LLVM and
# MLIR (35 MB packed) and the data (31 MB) do not fit the 64 MiB one call carries, so the data
# goes into build/gpu-data, carried by a second call to the same warm machine (whose bundle the
# first call unpacked): `carry: ["build/gpu-data"]`, `bash build/gpu-bundle/seeds build/gpu-data`.
#
# `gpu_bundle.sh --dry-run` (ctest's bench_gpu_report_dry_run, so the report cannot rot between GPU
# runs): packs the same bundle at xz -1 (XZ_LEVEL; fast, and an upper bound of the -9 size)
# into build/gpu-bundle-dry-run (a real bundle stays as it was), unpacks it with setup.sh, runs
# the report there on the simulator
# (SPMD_REPORT_DEVICE=sim: the graph and launch tests, bench_gpu_step on sim at batch 2,
# PyTorch's step in its smoke form), then the seeds' run on sim:2, small.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dry_run=0
case ${1:-} in
  --dry-run) dry_run=1 ;;
  "") ;;
  *) echo "gpu_bundle.sh: unknown argument '$1' (the only one is --dry-run)" >&2; exit 2 ;;
esac
xz_level=${XZ_LEVEL:-$((dry_run ? 1 : 9))}
[[ $xz_level =~ ^[0-9]$ ]] || { echo "gpu_bundle.sh: XZ_LEVEL must be 0 to 9, got '$xz_level'" >&2; exit 2; }
build=${BUILD_DIR:-$root/build}
bundle=$build/gpu-bundle data=$build/gpu-data
if ((dry_run)); then bundle=$build/gpu-bundle-dry-run data=$build/gpu-data-dry-run; fi  # never replaces a real bundle
data_source=${SPMD_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
data_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
for file in "${data_files[@]}"; do
  [[ -f $data_source/$file ]] || { echo "gpu_bundle: $data_source/$file is missing: install dataset-fashion-mnist (scripts/setup.sh) or set SPMD_FASHION_MNIST_DIR" >&2; exit 1; }
done
binaries=(tests/spmd_unit_tests tools/spmd-run/spmd-run samples/resnet18_fashion_mnist/resnet18_fashion_mnist
          benchmarks/bench_resnet18_train_step benchmarks/bench_resnet18_pmap_step benchmarks/bench_gpu_step
          benchmarks/bench_conv_layers benchmarks/bench_resnet18_forward)
# The DLPack module tests/dlpack/torch_exchange.py loads into the GPU machine's CUDA PyTorch.
binaries+=(tests/libspmd_torch_exchange.so)
for binary in "${binaries[@]}"; do
  [[ -x $build/$binary ]] || { echo "gpu_bundle: $build/$binary is missing: build first (bash scripts/build.sh)" >&2; exit 1; }
done
rm -rf "$bundle"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$bundle" "$stage/bin" "$stage/lib"
for binary in "${binaries[@]}"; do
  strip -o "$stage/bin/$(basename "$binary")" "$build/$binary"
done

# The libraries: what ldd resolves, less what every Linux machine with CUDA has.
provided='/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so|^/usr/local/cuda'
stubbed='/lib(z3|xml2|icuuc|icudata|icui18n)\.so'
for binary in "${binaries[@]}"; do ldd "$build/$binary"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
  sort -u | grep -v -E "$provided" | grep -v -E "$stubbed" | while read -r library; do
  cp -L "$library" "$stage/lib/"
done
cat > "$stage/stub.c" <<'STUB'
/* Stands in for a library whose functions spmd never calls; holds the data symbols the loader
   must bind when libLLVM is loaded. */
void *xmlFree = 0;
void xmlReadMemory(void) {}
STUB
printf 'LIBXML2_2.4.30 { global: xmlFree; local: *; };\nLIBXML2_2.6.0 { global: xmlReadMemory; } LIBXML2_2.4.30;\n' \
  > "$stage/xml2.map"
cc -shared -fPIC -o "$stage/lib/libxml2.so.2" -Wl,-soname,libxml2.so.2 -Wl,--version-script="$stage/xml2.map" "$stage/stub.c"
echo 'void spmd_z3_stub(void) {}' | cc -shared -fPIC -x c -o "$stage/lib/libz3.so.4" -Wl,-soname,libz3.so.4 -
touch "$stage/lib/.stubs" && printf 'libxml2.so.2\nlibz3.so.4\n' > "$stage/lib/.stubs"
tar -C "$stage" -cf - bin lib | xz "-$xz_level" -T0 > "$bundle/pack.tar.xz"

cat > "$bundle/setup.sh" <<'SETUP'
#!/usr/bin/env bash
# On the GPU machine: unpack bin/ and lib/, use the machine's own copy of each library it has,
# find CUDA's libraries, and say what the binaries resolve.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if command -v xz > /dev/null; then
  tar -C "$here" -xJf "$here/pack.tar.xz"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$here/pack.tar.xz" "$here"
fi
mkdir -p "$here/lib/unused"
for library in "$here"/lib/*.so*; do
  name=$(basename "$library")
  if ldconfig -p | grep -q -F " $name "; then mv "$library" "$here/lib/unused/"; fi
done
# cuDNN and NCCL may live in the toolkit or in Python's nvidia-* wheels.
cuda_dirs=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /usr/lib /opt \
                 \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' -o -name 'libcublas.so.13' -o -name 'libcublasLt.so.13' \
                    -o -name 'libnvrtc.so.13' -o -name 'libcudart.so.13' \) -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
printf '%s\n' "$here/lib:$cuda_dirs" > "$here/library_path"
echo "gpu-bundle: carried and used: $(cd "$here/lib" && ls -- *.so* 2>/dev/null | tr '\n' ' ')"
echo "gpu-bundle: the machine's own: $(cd "$here/lib/unused" && ls -- *.so* 2>/dev/null | tr '\n' ' ')"
echo "gpu-bundle: CUDA libraries from: $cuda_dirs"
missing=$(LD_LIBRARY_PATH="$(cat "$here/library_path")${LD_LIBRARY_PATH:-}" ldd "$here"/bin/* | grep "not found" | sort -u || true)
if [[ -n $missing ]]; then echo "gpu-bundle: still missing:"; echo "$missing"; exit 1; fi
echo "gpu-bundle: every library resolves ($(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'))"
SETUP
cat > "$bundle/run" <<'RUN'
#!/usr/bin/env bash
# build/gpu-bundle/run <binary> [args]: runs bin/<binary> with the carried libraries.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$(cat "$here/library_path")${LD_LIBRARY_PATH:-}"
exec "$here/bin/$1" "${@:2}"
RUN
cat > "$bundle/report" <<'REPORT'
#!/usr/bin/env bash
# build/gpu-bundle/report [FILE]: every GPU check in one go, into one report (default report.txt
# beside this script): the conformance suite on cuda:0 and cuda:0*4, every kernel case on the
# GPU against the reference, the GPU against the CPU and replica counts (SpmdEquivalenceCuda),
# the CUDA and NCCL tests, the step captured into CUDA graphs, bf16 (Bf16Test, which adds
# cuda:0 to its backends where a GPU is visible); PyTorch's CUDA tensors through DLPack into a
# call on cuda:0 and its result back (tests/dlpack/torch_exchange.py); then the GPU benchmarks (the
# training step at width 64, graphs on and off, with each step's graph launches and host waits,
# and one profiled row: the per-op table on the GPU's clock; cuDNN's algorithms timed, then the
# graph rows again as its heuristic ranks them; with cuDNN's graph engines offered; with
# channels-last activations), each convolution shape alone beside PyTorch's
# (benchmarks/compare_conv_layers.py at batch 256) and PyTorch's step beside them; then the
# host CPU's training step, forward (also capped to AVX2) and convolutions beside PyTorch's
# (benchmarks/torch_gpu_step.py: fastest, deterministic, channels-last and bf16 at batch 64 and
# 256, the fastest at 1024). Each part has a time limit (TEST_LIMIT_S,
# BENCH_LIMIT_S) within the whole report's (REPORT_LIMIT_S, 420 s; the parts past it say they were
# skipped), so a hang still leaves a report, PyTorch's rows right after spmd's first. Exits
# non-zero when a test or the DLPack exchange fails.
# SPMD_REPORT_DEVICE=sim (gpu_bundle.sh --dry-run) runs the same parts on the simulator, small.
# PYTHON names the python3 with PyTorch (default python3).
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/report.txt}
device=${SPMD_REPORT_DEVICE:-cuda}
case $device in
  cuda) filter='*Conformance*cuda*:*CudaKernelTest*cuda*:*SpmdEquivalenceCuda*:CudaTest*:Nccl*:StepGraphTest.OnAGpu*:LayoutTest.OnAGpu*:Bf16Test.*:CustomOpTest.*OnAGpu*:DLPackTest.Cuda*:GroupedCollectivesTest.OnAGpu*:EmptyTensorDeviceTest.OnAGpu*'
        bench=(--devices=cuda:0 --benchmark_filter='width:64')
        bench_untimed=(--devices=cuda:0 --benchmark_filter='Train.*width:64/graphs:1')
        graph_rows=(--devices=cuda:0 --benchmark_filter='Train.*batch:(64|256)/width:64/graphs:1/bf16:0')
        last_rows=(--devices=cuda:0 --benchmark_filter='Train.*batch:(64|256)/width:64/graphs:1')
        layers=(--device cuda:0 --batch 256 --reps 10); gemm_layers=(--device cuda:0 --batch 256 --reps 10)
        cpu_args=(--reps 3); cpu_layers=(--reps 5); cpu_runs=(train_step forward)
        cpu_caps=("" "ONEDNN_MAX_CPU_ISA=AVX2 SPMD_MAX_CPU_ISA=avx2"); exchange_devices=cuda:0 ;;
  sim) filter='StepGraphTest.*:LaunchTest.*'
       bench=(--devices=sim --benchmark_filter='batch:2/width:8'); torch_args=(--smoke)
       bench_untimed=(--devices=sim --benchmark_filter='Train.*batch:2/width:8/graphs:1')
       graph_rows=(--devices=sim --benchmark_filter='Train.*batch:2/width:8/graphs:1/bf16:0')
       last_rows=(--devices=sim --benchmark_filter='Train.*batch:2/width:8/graphs:1')
       layers=(--device sim --smoke); gemm_layers=(--device sim --batch 2 --width 4 --reps 1)
       cpu_args=(--smoke); cpu_layers=(--smoke); cpu_runs=(forward); cpu_caps=("SPMD_MAX_CPU_ISA=avx2")
       exchange_devices=cpu:1 ;;
  *) echo "report: SPMD_REPORT_DEVICE must be cuda or sim, got '$device'" >&2; exit 2 ;;
esac
budget=${REPORT_LIMIT_S:-420} start=$SECONDS exchange=0
[[ $budget =~ ^[0-9]+$ ]] || { echo "report: REPORT_LIMIT_S must be a whole number of seconds, got '$budget'" >&2; exit 2; }
# part LIMIT COMMAND...: COMMAND under `timeout`, at most LIMIT seconds and what is left of the
# report's budget (REPORT_LIMIT_S, 420: the device tool's call limit less setup), so the parts
# after a slow one still run or say they were skipped; with under 15 s left it only says so.
part() {
  local cap=$1 left=$((budget - (SECONDS - start)))
  shift
  ((left < cap)) && cap=$left
  if ((cap < 15)); then
    echo "# skipped, the report's budget of ${budget} s is spent: $*"
    return 124
  fi
  timeout "$cap" "$@"
}
{
  echo "# spmd GPU report, $(date -u +%F' '%T) UTC, on $device"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  part "${TEST_LIMIT_S:-300}" "$here/run" spmd_unit_tests --gtest_color=no --gtest_filter="$filter"
  tests=$?
  echo "# tests: exit $tests"
  # PyTorch's tensors and spmd's values through DLPack in one process (tests/dlpack/
  # torch_exchange.py, with the machine's PyTorch): on cuda, CUDA tensors into a call on cuda:0
  # in place and its result out at spmd's buffer's address. The module's libraries come from
  # --library-path only where PyTorch has not loaded its own (not LD_LIBRARY_PATH: see launch/).
  if [[ -f $here/../../tests/dlpack/torch_exchange.py ]]; then
    part "${BENCH_LIMIT_S:-200}" "${PYTHON:-python3}" "$here/../../tests/dlpack/torch_exchange.py" \
      "$here/bin/libspmd_torch_exchange.so" --devices "$exchange_devices" --library-path "$(cat "$here/library_path")"
    exchange=$?
    echo "# DLPack with PyTorch on $exchange_devices: exit $exchange"
  fi
  # The step with cuDNN's algorithms timed (SPMD_CUDNN_SEARCH=1), then as its heuristic ranks
  # them, untimed (=0): the graph rows of each, and the profile of the first.
  for search in 1 0; do
    echo "# benchmark, SPMD_CUDNN_SEARCH=$search"
    rows=("${bench[@]}")
    ((search)) || rows=("${bench_untimed[@]}")
    part "${BENCH_LIMIT_S:-200}" env SPMD_CUDNN_SEARCH=$search "$here/run" bench_gpu_step "${rows[@]}" \
      --benchmark_counters_tabular=true
    bench_status=$?
    echo "# benchmark: exit $bench_status"
    ((bench_status == 0)) || break
  done
  # PyTorch's step beside it (the machine's python3 with CUDA PyTorch), from the checkout the
  # bundle sits in.
  torch_step=$here/../../benchmarks/torch_gpu_step.py
  if [[ -f $torch_step ]]; then
    if [[ $device == cuda ]]; then  # every mode at the targets' batches, then the fastest at 1024
      part "${BENCH_LIMIT_S:-200}" "${PYTHON:-python3}" "$torch_step" --batches 64,256
      echo "# PyTorch: exit $?"
      part "${BENCH_LIMIT_S:-200}" "${PYTHON:-python3}" "$torch_step" --modes fastest --batches 1024
    else
      part "${BENCH_LIMIT_S:-200}" "${PYTHON:-python3}" "$torch_step" "${torch_args[@]}"
    fi
    echo "# PyTorch: exit $?"
  else
    echo "# PyTorch: $torch_step is not here; run benchmarks/torch_gpu_step.py from the checkout"
  fi
  # Each convolution shape alone, spmd's kernels beside PyTorch's (fastest and deterministic).
  if [[ -f $here/../../benchmarks/compare_conv_layers.py ]]; then
    part "${BENCH_LIMIT_S:-200}" env SPMD_CUDNN_SEARCH=1 "${PYTHON:-python3}" "$here/../../benchmarks/compare_conv_layers.py" \
      --bench "$here/launch/bench_conv_layers" "${layers[@]}"
    echo "# per-layer table: exit $?"
  fi
  # The GEMM convolution (im2col + cuBLAS, cuda/ConvGemm.cu) pinned on every layer: its times
  # beside the choices above.
  part "${BENCH_LIMIT_S:-200}" env SPMD_KERNELS=conv2d:gemm,conv2d_backward_data:gemm,conv2d_backward_filter:gemm \
    "$here/run" bench_conv_layers "${gemm_layers[@]}"
  echo "# per-layer, gemm pinned: exit $?"
  # cuDNN's graph API (SPMD_CUDNN_GRAPH=1, cuda/CudnnGraph.h): its deterministic engine
  # configurations timed beside the legacy algorithms, per layer (the log names each choice) and
  # in the step's graph row.
  part "${BENCH_LIMIT_S:-200}" env SPMD_CUDNN_GRAPH=1 SPMD_LOG_COMPILES=1 "$here/run" bench_conv_layers "${gemm_layers[@]}" 2>&1 |
    grep -v '^spmd: cpu kernel'
  echo "# per-layer, graph engines offered: exit ${PIPESTATUS[0]}"
  part "${BENCH_LIMIT_S:-200}" env SPMD_CUDNN_GRAPH=1 "$here/run" bench_gpu_step "${graph_rows[@]}" --benchmark_counters_tabular=true
  echo "# benchmark, graph engines offered: exit $?"
  # Channels-last activations (SPMD_CHANNELS_LAST=1: cuDNN's NHWC convolutions, the tensor cores'
  # layout for bf16): each layer (the log names each choice), then the step's graph rows in f32
  # and bf16.
  part "${BENCH_LIMIT_S:-200}" env SPMD_CHANNELS_LAST=1 SPMD_LOG_COMPILES=1 "$here/run" bench_conv_layers "${gemm_layers[@]}" 2>&1 |
    grep -v '^spmd: cpu kernel'
  echo "# per-layer, channels-last: exit ${PIPESTATUS[0]}"
  part "${BENCH_LIMIT_S:-200}" env SPMD_CHANNELS_LAST=1 "$here/run" bench_gpu_step "${last_rows[@]}" --benchmark_counters_tabular=true
  echo "# benchmark, channels-last: exit $?"
  # The GPU machine's own CPU (another CPU kind than this project's machines; issue 51): the
  # training step and the forward beside PyTorch on its cores, at its widest ISA and capped to
  # AVX2, then each convolution shape. Smoke-sized on sim.
  if [[ -f $here/../../benchmarks/compare_resnet18_train_step.py ]]; then
    lscpu | grep -E '^(Model name|CPU\(s\)):' | tr -s ' '
    echo "ISA: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    for caps in "${cpu_caps[@]}"; do
      echo "# CPU step and forward${caps:+, $caps}"
      for what in "${cpu_runs[@]}"; do
        part "${BENCH_LIMIT_S:-200}" env $caps "${PYTHON:-python3}" \
          "$here/../../benchmarks/compare_resnet18_$what.py" --bench "$here/launch/bench_resnet18_$what" "${cpu_args[@]}"
        echo "# CPU $what: exit $?"
      done
    done
    part "${BENCH_LIMIT_S:-200}" "${PYTHON:-python3}" "$here/../../benchmarks/compare_conv_layers.py" \
      --bench "$here/launch/bench_conv_layers" "${cpu_layers[@]}"
    echo "# CPU per-layer table: exit $?"
  fi
  ((tests == 0)) || exit $tests
  ((exchange == 0)) || exit $exchange
  exit $bench_status
} 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
echo "gpu report: $out"
exit "$status"
REPORT
cat > "$bundle/seeds" <<'SEEDS'
#!/usr/bin/env bash
# build/gpu-bundle/seeds DATA_DIR [FILE]: the seeds' run, on the machine where setup.sh unpacked
# this bundle: full-width ResNet-18 on Fashion-MNIST (DATA_DIR: the four *-ubyte.gz files,
# build/gpu-data), global batch 256 over cuda:0*2, lr 0.1, plain SGD, cross-replica BatchNorm (the
# function PyTorch's one model computes), SEEDS_EPOCHS epochs (10): each epoch's test accuracy and
# time, then PyTorch's same run on that GPU (benchmarks/torch_fashion_mnist_epoch.py, fastest),
# into FILE (default seeds.txt beside this script). SPMD_REPORT_DEVICE=sim: sim:2, width 2, 256
# images, one epoch (the dry run). Each run has a time limit (SEEDS_LIMIT_S, 300).
here=$(cd "$(dirname "$0")" && pwd)
data=${1:?usage: seeds DATA_DIR [FILE] (DATA_DIR: build/gpu-data, carried by this call)}
out=${2:-$here/seeds.txt}
epochs=${SEEDS_EPOCHS:-10}
[[ $epochs =~ ^[1-9][0-9]*$ ]] || { echo "seeds: SEEDS_EPOCHS must be a positive whole number, got '$epochs'" >&2; exit 2; }
case ${SPMD_REPORT_DEVICE:-cuda} in
  cuda) spmd=(--devices 'cuda:0*2' --width 64 --batch 256 --epochs "$epochs")
        torch=(--device cuda --width 64 --batch 256 --epochs "$epochs") ;;
  sim) spmd=(--devices sim:2 --width 2 --batch 32 --epochs 1 --train-limit 256 --test-limit 200)
       torch=(--width 2 --batch 32 --epochs 1 --train-limit 256 --test-limit 200) ;;
  *) echo "seeds: SPMD_REPORT_DEVICE must be cuda or sim, got '${SPMD_REPORT_DEVICE}'" >&2; exit 2 ;;
esac
for file in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [[ -f $data/$file ]] || { echo "seeds: $data/$file is missing: carry build/gpu-data in this call" >&2; exit 1; }
done
if [[ ! -x $here/bin/resnet18_fashion_mnist || ! -f $here/library_path ]]; then
  echo "seeds: $here is not unpacked: run 'bash build/gpu-bundle/setup.sh' first (the report's call, on this same warm machine; a machine given back starts bare)" >&2
  exit 1
fi
{
  echo "# spmd seeds' run, $(date -u +%F' '%T) UTC, on ${SPMD_REPORT_DEVICE:-cuda}: ${spmd[*]}, lr 0.1, plain SGD, --bn cross"
  start=$EPOCHREALTIME
  timeout "${SEEDS_LIMIT_S:-300}" "$here/run" resnet18_fashion_mnist "${spmd[@]}" --lr 0.1 --momentum 0 --weight-decay 0 \
    --bn cross --data-dir "$data" --out "$here/seeds-run" --no-plot > "$here/seeds-spmd.log" 2>&1
  status=$?
  grep -E "compiled and ran|^epoch [0-9]+/[0-9]+:|^done" "$here/seeds-spmd.log"
  ((status == 0)) || tail -n 20 "$here/seeds-spmd.log"
  echo "# spmd: exit $status, $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s wall (data loading and compilation included)"
  start=$EPOCHREALTIME
  timeout "${SEEDS_LIMIT_S:-300}" "${PYTHON:-python3}" "$here/../../benchmarks/torch_fashion_mnist_epoch.py" "${torch[@]}" \
    --lr 0.1 --momentum 0 --data-dir "$data"
  torch_status=$?
  echo "# PyTorch: exit $torch_status, $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s wall"
  ((status == 0)) || exit $status
  exit $torch_status
} 2>&1 | tee "$out"
exit "${PIPESTATUS[0]}"
SEEDS
# One launcher per binary (with the carried libraries), for the scripts that run a binary they
# are given: the libraries must not reach those scripts' own Python (the stubs would shadow the
# real libxml2 PyTorch's dependencies load).
mkdir -p "$bundle/launch"
for binary in "${binaries[@]}"; do
  printf '#!/usr/bin/env bash\nexec "$(dirname "$0")/../run" %s "$@"\n' "$(basename "$binary")" > "$bundle/launch/$(basename "$binary")"
  chmod +x "$bundle/launch/$(basename "$binary")"
done
chmod +x "$bundle/setup.sh" "$bundle/run" "$bundle/report" "$bundle/seeds"
rm -rf "$data"
mkdir -p "$data"
for file in "${data_files[@]}"; do cp "$data_source/$file" "$data/"; done
du -sh "$data" | awk '{print "gpu_bundle: the seeds data, " $1 " in " $2 " (carried by a second call)"}'
du -sh "$bundle" | awk '{print "gpu_bundle: " $1 " in " $2 " (the device tool carries at most 64 MiB)"}'
bytes=$(du -sb "$bundle" | cut -f1)
if ((bytes > 64 * 1024 * 1024)); then
  if ((xz_level < 9)); then
    echo "gpu_bundle: at xz -$xz_level the bundle is over the 64 MiB the device tool carries; -9 packs smaller (run without --dry-run to know)" >&2
  else
    echo "gpu_bundle: $bundle is over the 64 MiB the device tool carries; leave a binary out or carry it separately" >&2
    exit 1
  fi
fi
if ((dry_run)); then
  # Unpack and report where it was packed (build/gpu-bundle-dry-run, placed as the real bundle
  # is, so the report finds the checkout's benchmarks/ two levels up), then remove it.
  bash "$bundle/setup.sh"
  SPMD_REPORT_DEVICE=sim bash "$bundle/report" "$bundle/report.txt"
  if grep -E '^# .*exit [1-9]' "$bundle/report.txt"; then
    echo "gpu_bundle: a part of the report failed on sim (above; the report is $bundle/report.txt)" >&2
    exit 1
  fi
  SPMD_REPORT_DEVICE=sim bash "$bundle/seeds" "$data" "$bundle/seeds.txt"
  grep -q "^done: test accuracy" "$bundle/seeds.txt" || { echo "gpu_bundle: the seeds' run printed no test accuracy" >&2; exit 1; }
  grep -q "test accuracy [0-9.]*%" <(grep "^PyTorch" "$bundle/seeds.txt") || { echo "gpu_bundle: PyTorch's seeds' run printed no test accuracy" >&2; exit 1; }
  echo "gpu_bundle: dry run on sim passed"
  rm -rf "$bundle" "$data"
fi
