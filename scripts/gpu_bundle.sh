#!/usr/bin/env bash
# Packs what the lent GPU machine needs into build/gpu-bundle (carry it with the device tool's
# `carry: ["build/gpu-bundle"]`): stripped test, sample, benchmark and spmd-run binaries built
# here (with nvcc), and the Debian packages of the shared libraries that machine lacks (LLVM,
# MLIR, oneDNN, z3, Boost.Context: 51 MB of .deb files on 2026-11-25). There, `bash build/gpu-bundle/setup.sh` unpacks them
# and reports any library still missing; then run binaries through build/gpu-bundle/run, and
# every GPU check at once with build/gpu-bundle/report (one report file).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bundle=$build/gpu-bundle
[[ -x $build/tools/spmd-run/spmd-run ]] || { echo "gpu_bundle: build first (bash scripts/build.sh)" >&2; exit 1; }
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/debs"
for binary in tests/spmd_unit_tests tools/spmd-run/spmd-run samples/resnet18_fashion_mnist/resnet18_fashion_mnist \
              benchmarks/bench_resnet18_train_step benchmarks/bench_resnet18_pmap_step benchmarks/bench_gpu_step; do
  strip -o "$bundle/bin/$(basename "$binary")" "$build/$binary"
done
# Compressed, so binaries and libraries stay under the 64 MiB a device call carries; setup.sh
# unpacks them (gzip is on every machine).
gzip -9 "$bundle"/bin/*
(cd "$bundle/debs" && apt-get download libllvm19 libmlir-19 libdnnl2 libz3-4 libboost-context1.74.0 2>/dev/null)
cat > "$bundle/setup.sh" <<'SETUP'
#!/usr/bin/env bash
# On the GPU machine: unpack the carried libraries into lib/ and show what the binaries resolve.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/root"
for packed in "$here"/bin/*.gz; do [[ -e $packed ]] && gzip -d "$packed" && chmod +x "${packed%.gz}"; done
for deb in "$here"/debs/*.deb; do
  if command -v dpkg-deb > /dev/null; then
    dpkg-deb -x "$deb" "$here/root"
  else  # a .deb is an ar archive holding data.tar.*
    tmp=$(mktemp -d) && (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$here/root") && rm -rf "$tmp"
  fi
done
libs=$(find "$here/root" -name "*.so*" -printf "%h\n" | sort -u | tr '\n' ':')
printf '%s\n' "$libs" > "$here/library_path"
missing=$(LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:-}" ldd "$here"/bin/* | grep "not found" | sort -u || true)
if [[ -n $missing ]]; then echo "gpu-bundle: still missing:"; echo "$missing"; exit 1; fi
echo "gpu-bundle: every library resolves ($(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi'))"
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
# the CUDA and NCCL tests, the step captured into CUDA graphs; then the GPU benchmarks (the
# training step at batch 64, 256 and 1024, graphs on and off). Exits non-zero when a test fails.
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/report.txt}
{
  echo "# spmd GPU report, $(date -u +%F' '%T) UTC"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  "$here/run" spmd_unit_tests --gtest_color=no \
    --gtest_filter='*Conformance*cuda*:*CudaKernelTest*cuda*:*SpmdEquivalenceCuda*:CudaTest*:Nccl*:StepGraphTest.OnAGpu*'
  tests=$?
  "$here/run" bench_gpu_step --devices=cuda:0 --benchmark_filter='width:64' --benchmark_counters_tabular=true
  exit $tests
} 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
echo "gpu report: $out"
exit "$status"
REPORT
chmod +x "$bundle/setup.sh" "$bundle/run" "$bundle/report"
du -sh "$bundle" | awk '{print "gpu_bundle: " $1 " in " $2 " (the device tool carries at most 64 MiB)"}'
bytes=$(du -sb "$bundle" | cut -f1)
if ((bytes > 64 * 1024 * 1024)); then
  echo "gpu_bundle: $bundle is over the 64 MiB the device tool carries; leave a binary out or carry it separately" >&2
  exit 1
fi
