#!/usr/bin/env bash
# drift_avx2: the drift suites with oneDNN and our own kernels held to AVX2 (the caps are set by
# ctest's ENVIRONMENT). On a CPU without AVX-512 both run their AVX2 code anyway, so that is the
# default run again: it skips (exit 77) and says so. Usage: drift_avx2.sh SPMD_UNIT_TESTS [gtest flags...]
set -euo pipefail
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "drift_avx2: skipped: this CPU has no AVX-512, so the default run already ran the AVX2 code"
  exit 77
fi
exec "$@"
