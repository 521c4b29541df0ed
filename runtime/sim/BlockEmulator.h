// The simulator's GPU blocks: a block kernel of the kernel library (a functor taking a Block,
// runtime/kernels/Common.h) runs with its real launch geometry, each of a block's threads a fiber
// with its own stack, __syncthreads (Block::sync) a real barrier that every thread of the block
// must reach, shared memory per block. Hostile by design, as a GPU is:
//   - blocks run in a seeded random order, and at every barrier the block's threads resume in a
//     new random order (SPMD_SIM_SEED picks the seed; every error names it and the launch);
//   - two threads touching one shared element between barriers, one of them writing, is a race
//     and fails the launch, as does reading shared memory no thread of the block has written,
//     indexing past the launch's shared memory, and a barrier some threads of a block never
//     reach.
// Grid-stride loops (SimApi::forEach) take their order from gridStrideOrder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/kernels/Launch.h"

namespace spmd::runtime::sim {

class GridRun;

// One thread's view of the block it runs in; kernel code sees only this interface (CUDA's
// GpuBlock in runtime/cuda/CudaApi.cuh offers the same).
class SimBlock {
 public:
  template <typename T>
  class Shared;
  int thread() const { return thread_; }
  int64_t block() const { return block_; }
  int blockSize() const;
  int64_t gridSize() const;
  void sync();  // __syncthreads
  template <typename T>
  Shared<T> shared() { return Shared<T>(this); }

  // Checked access to `size` bytes at `offset` of the block's shared memory.
  std::byte* access(size_t offset, size_t size, bool write);

 private:
  friend class GridRun;
  GridRun* grid_ = nullptr;
  int thread_ = 0;
  int64_t block_ = 0;
};

// The launch's dynamic shared memory as an array of T; each element access is checked.
template <typename T>
class SimBlock::Shared {
 public:
  class Ref {
   public:
    operator T() const {
      T value;
      std::memcpy(&value, block_->access(offset_, sizeof(T), false), sizeof(T));
      return value;
    }
    Ref& operator=(T value) {
      std::memcpy(block_->access(offset_, sizeof(T), true), &value, sizeof(T));
      return *this;
    }
    Ref& operator=(const Ref& other) { return *this = T(other); }
    Ref& operator+=(T value) { return *this = T(*this) + value; }

   private:
    friend class Shared;
    Ref(SimBlock* block, size_t offset) : block_(block), offset_(offset) {}
    SimBlock* block_;
    size_t offset_;
  };
  explicit Shared(SimBlock* block) : block_(block) {}
  Ref operator[](int64_t i) const { return Ref(block_, size_t(i) * sizeof(T)); }

 private:
  SimBlock* block_;
};

// Runs `body` on every thread of every block of `launch` (already checked), as described above.
// `where` names the step in errors. Throws spmd::Error on the first failure.
void runBlocks(const kernels::Launch& launch, const std::string& where, const std::function<void(SimBlock&)>& body);

// A grid-stride loop's visiting order: its blocks and the threads of a block, each a seeded
// random permutation; thread t of block b visits b * threads + t, then strides by the grid.
struct GridOrder {
  std::vector<long long> blocks;  // long long: the type the generated kernels index with
  std::vector<int> threads;
};
GridOrder gridStrideOrder(const kernels::Launch& launch);

}  // namespace spmd::runtime::sim
