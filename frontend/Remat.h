// spmd::checkpoint: rematerialization, as jax.checkpoint. Inside a function that value_and_grad
// differentiates, the ops `fn` records are one checkpoint segment: the backward pass recomputes
// them from the segment's inputs (compiler pass spmd-autodiff) instead of keeping their values
// alive from the forward pass, so peak memory drops by the segment's saved activations at the
// cost of running its forward ops twice. The recomputation runs the same ops on the same
// values, so results are the same bits with and without it.
//
//   Tensor h = spmd::checkpoint([&](const Tensor& x) { return block(ctx, x); })(x);
//
// Nested checkpoints: an op belongs to the innermost. Outside value_and_grad the mark changes
// nothing; outside a traced function calling the result is an error at the caller's line.
#pragma once

#include <cstdint>
#include <utility>

#include "frontend/Tensor.h"

namespace spmd {

namespace detail {

// While alive, marks every op recorded into the trace's current block as one segment (on
// destruction, unless an exception is unwinding).
class RematSegment {
 public:
  explicit RematSegment(Loc loc);
  ~RematSegment();
  RematSegment(const RematSegment&) = delete;
  RematSegment& operator=(const RematSegment&) = delete;

 private:
  void* trace_ = nullptr;   // detail::Trace*
  void* block_ = nullptr;   // mlir::Block*
  void* before_ = nullptr;  // mlir::Operation* last in the block before the segment (nullptr: none)
  int64_t segment_ = 0;
  int exceptions_ = 0;
};

}  // namespace detail

template <typename F>
class Checkpointed {
 public:
  Checkpointed(F f, Loc loc) : f_(std::move(f)), loc_(loc) {}

  template <typename... Args>
  auto operator()(Args&&... args) const {
    detail::RematSegment segment(loc_);
    return f_(std::forward<Args>(args)...);
  }

 private:
  F f_;
  Loc loc_;
};

template <typename F>
Checkpointed<F> checkpoint(F f, Loc loc = Loc::current()) {
  return Checkpointed<F>(std::move(f), loc);
}

}  // namespace spmd
