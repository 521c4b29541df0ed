#!/usr/bin/env bash
# The package a user installs: builds spmd's .deb from BUILD with CPack, installs it with dpkg
# into a scratch root (its own dpkg database; no root, nothing touches the machine's /usr), then
# as a user would: the installed programs run from there (relocated: no RUNPATH into the build
# or source tree), and the outside project in tests/install/project (find_package(spmd CONFIG
# REQUIRED), spmd::spmd, RTTI on) configures, builds and trains two steps against it.
# Usage: check_package.sh BUILD SCRATCH
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
scratch=$2
rm -rf "$scratch"
mkdir -p "$scratch/root/var/lib/dpkg/info" "$scratch/root/var/lib/dpkg/updates" "$scratch/cpack"
touch "$scratch/root/var/lib/dpkg/status"

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$scratch/cpack" > "$scratch/cpack.log" ||
  { cat "$scratch/cpack.log"; exit 1; }
deb=$(ls "$scratch"/cpack/spmd_*.deb)
echo "package: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB"
depends=$(dpkg-deb --field "$deb" Depends)
echo "Depends: $depends"
for needed in libmlir-19 libdnnl libopenmpi; do
  [[ $depends == *"$needed"* ]] || { echo "Depends lacks $needed"; exit 1; }
done
# The scratch database holds none of those packages: their files are on this machine already.
dpkg --root="$scratch/root" --force-not-root --force-depends --force-script-chrootless \
  --log=/dev/null -i "$deb" > "$scratch/dpkg.log" || { cat "$scratch/dpkg.log"; exit 1; }
dpkg --root="$scratch/root" --force-not-root -s spmd | grep -q "Status: install ok installed"
prefix=$scratch/root/usr

for program in spmd-opt spmd-run resnet18_fashion_mnist; do
  test -x "$prefix/bin/$program" || { echo "the package lacks bin/$program"; exit 1; }
  "$prefix/bin/$program" --version | grep -q "spmd 0" || { echo "$program --version failed"; exit 1; }
done
test -f "$prefix/lib/cmake/spmd/spmdConfig.cmake"
test -f "$prefix/include/spmd/spmd.h"
while IFS= read -r -d '' file; do
  if runpath=$(readelf -d "$file" 2>/dev/null | grep -E 'R(UN)?PATH'); then
    if [[ $runpath == *"$build"* || $runpath == *"$source_dir"* ]]; then
      echo "$file points into the build: $runpath"
      exit 1
    fi
  fi
done < <(find "$prefix/bin" "$prefix/lib" -type f -print0)

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$here/project" -B "$scratch/consumer" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" > "$scratch/consumer.log" || { cat "$scratch/consumer.log"; exit 1; }
cmake --build "$scratch/consumer" >> "$scratch/consumer.log" || { cat "$scratch/consumer.log"; exit 1; }
"$scratch/consumer/consumer"
