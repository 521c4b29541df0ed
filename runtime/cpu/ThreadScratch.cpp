// Per-thread scratch of the CPU's own convolutions and GEMM (runtime/cpu/BlockedLoops.h). The chunked
// Winograd's filter transforms are tens of MB written 36 or 16 planes at a time (a plane per
// point of the transform, each a page or more from the next): on 4 KiB pages every row written
// touches another page, and the TLB misses cost more than the arithmetic (Winograd F(4x4, 3x3) at
// 512 channels, AMD Zen 4). Large buffers are therefore aligned to 2 MiB and advised onto
// transparent huge pages (MADV_HUGEPAGE: honoured where the system's setting is `madvise` or
// `always`, a no-op where it is `never`).
#include <sys/mman.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "runtime/base/Error.h"
#include "runtime/cpu/BlockedLoops.h"

namespace spmd::runtime::cpu {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

struct Freed {
  void operator()(float* p) const { std::free(p); }
};

struct Buffer {
  std::unique_ptr<float, Freed> data;
  int64_t elements = 0;
};

}  // namespace

float* threadScratch(int which, int64_t elements) {
  thread_local Buffer buffers[3];
  Buffer& b = buffers[which];
  if (b.elements < elements) {
    b.data.reset();  // the old buffer goes before the new one is taken: the peak stays one buffer
    const size_t bytes = sizeof(float) * static_cast<size_t>(elements);
    const bool huge = bytes >= kHugePage;
    const size_t alignment = huge ? kHugePage : 64;
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (!p)
      throw Error("the CPU kernels' scratch (convolutions, GEMM) could not take " + std::to_string(rounded >> 20) +
                  " MiB more host memory: lower the batch per replica or free memory");
    if (huge) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
    b.data.reset(static_cast<float*>(p));
    b.elements = static_cast<int64_t>(rounded / sizeof(float));
  }
  return b.data.get();
}

}  // namespace spmd::runtime::cpu
