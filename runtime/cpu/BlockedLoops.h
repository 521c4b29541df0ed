// Host-loop helpers shared by the CPU kernels written here (runtime/cpu/Winograd.cpp,
// runtime/cpu/StridedConv.cpp, the GEMM's packed panels in runtime/cpu/OwnGemm.cpp): per-thread
// scratch and OpenMP loops over rows of work that dispatch on the activations' channel block.
#pragma once

#include <cstdint>

namespace spmd::runtime::cpu {

// Scratch buffer `which` (0-2) of the calling thread, grown to at least `elements` floats and
// kept between calls (its contents are not kept when it grows). Each device runs its steps on one
// thread and a kernel's OpenMP team shares the caller's buffers; no kernel holds them past its own
// call. Buffers from 2 MiB on lie on huge pages where the kernel allows (runtime/cpu/ThreadScratch.cpp).
float* threadScratch(int which, int64_t elements);

// rows16(r0, r1) or rows8(r0, r1) (the nChw16c or nChw8c code) over [0, rows) on the OpenMP pool,
// `grain` rows an iteration.
template <typename Rows8, typename Rows16>
void overBlockRows(int64_t block, int64_t rows, int64_t grain, Rows8 rows8, Rows16 rows16) {
#pragma omp parallel for schedule(static)
  for (int64_t r0 = 0; r0 < rows; r0 += grain) {
    const int64_t r1 = r0 + grain < rows ? r0 + grain : rows;
    if (block == 16) rows16(r0, r1);
    else rows8(r0, r1);
  }
}

}  // namespace spmd::runtime::cpu
