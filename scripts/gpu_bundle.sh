#!/usr/bin/env bash
# Packs what the lent GPU machine needs into build/gpu-bundle (carry it with the device tool's
# `carry: ["build/gpu-bundle"]`): stripped test, sample, benchmark and spmd-run binaries built
# here (with nvcc), and the Debian packages of the shared libraries that machine lacks (LLVM,
# MLIR, oneDNN, z3: ~49 MB of .deb files). There, `bash build/gpu-bundle/setup.sh` unpacks them
# and reports any library still missing; then run binaries through build/gpu-bundle/run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bundle=$build/gpu-bundle
[[ -x $build/tools/spmd-run/spmd-run ]] || { echo "gpu_bundle: build first (bash scripts/build.sh)" >&2; exit 1; }
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/debs"
for binary in tests/spmd_unit_tests tools/spmd-run/spmd-run samples/resnet18_fashion_mnist/resnet18_fashion_mnist \
              benchmarks/bench_resnet18_train_step benchmarks/bench_resnet18_pmap_step; do
  strip -o "$bundle/bin/$(basename "$binary")" "$build/$binary"
done
# Compressed, so binaries and libraries stay under the 64 MiB a device call carries; setup.sh
# unpacks them (gzip is on every machine).
gzip -9 "$bundle"/bin/*
(cd "$bundle/debs" && apt-get download libllvm19 libmlir-19 libdnnl2 libz3-4 2>/dev/null)
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
chmod +x "$bundle/setup.sh" "$bundle/run"
du -sh "$bundle" | awk '{print "gpu_bundle: " $1 " in " $2 " (the device tool carries at most 64 MiB)"}'
