#!/usr/bin/env bash
# drift_omp2: the drift suites with two OpenMP threads a process. Where the process has two
# anyway (OpenMP's default is the cores it may run on), that is the default run again, so it
# skips (exit 77) and says so. Usage: drift_omp2.sh SPMD_UNIT_TESTS [gtest flags...]
set -euo pipefail
# nproc honours OMP_NUM_THREADS, which must not count here: the cores this process may use.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [[ -z ${OMP_NUM_THREADS:-} && $cores == 2 ]]; then
  echo "drift_omp2: skipped: this machine's default run already uses 2 OpenMP threads ($cores cores)"
  exit 77
fi
OMP_NUM_THREADS=2 exec "$@"
