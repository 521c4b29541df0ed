// Per-thread scratch of the CPU's own convolutions and GEMM (runtime/cpu/BlockedLoops.h). The chunked
// Winograd's filter transforms are tens of MB written 36 or 16 planes at a time, so large buffers
// go on huge pages where the system allows (allocateAligned, runtime/base/HostMemory.h).
#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/base/Error.h"
#include "runtime/base/HostMemory.h"
#include "runtime/cpu/BlockedLoops.h"

namespace spmd::runtime::cpu {
namespace {

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
    size_t rounded = 0;
    void* p = allocateAligned(sizeof(float) * static_cast<size_t>(elements), &rounded);
    if (!p)
      throw Error("the CPU kernels' scratch (convolutions, GEMM) could not take " +
                  std::to_string((sizeof(float) * static_cast<size_t>(elements)) >> 20) +
                  " MiB more host memory: lower the batch per replica or free memory");
    b.data.reset(static_cast<float*>(p));
    b.elements = static_cast<int64_t>(rounded / sizeof(float));
  }
  return b.data.get();
}

}  // namespace spmd::runtime::cpu
