// Indexing by i32 tensors, composed of the dialect's lookups and scatters (embedding,
// take_along_axis, scatter, segment sums), with no kernels of their own: take (jnp.take), its
// inverses indexAdd / indexCopy along one axis, and NumPy's indexing by tensors, slices and an
// ellipsis, x[i, j], x[:, i] (indexGet) and x.at[...].set / .add (indexPut, torch's index_put). An index out
// of range is a run-time error at the caller's line naming its position in the index tensor it
// came from (jax clamps a lookup and drops an update). Checked against PyTorch in f64 with their
// gradients (ComposedTorchTest).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// Slices of x at the i32 `indices` along `axis` (jnp.take; torch.index_select for 1-D indices):
// the result's shape is x's with `axis` replaced by the indices' shape. An index outside
// [0, x.dim(axis)) is a run-time error naming its position, as `embedding`'s (which this is, on
// x with `axis` moved first); the gradient sums the slices of repeated indices. An i32 x (labels,
// ids) moves exactly, by way of f64; so do indexGet's, indexCopy's and indexPut's writes, while
// indexAdd and indexPut(accumulate) refuse i32 values (cast them to a float type first).
Tensor take(const Tensor& x, const Tensor& indices, int64_t axis, Loc loc = Loc::current());

// take's inverses: x with the slices of `source` added (torch.index_add, jnp's x.at[index].add)
// or written (torch.index_copy, x.at[index].set) at the i32 `index` [K] along `axis`; source is
// x's shape with K along the axis. Repeated indices add up; written, the last one wins (torch
// leaves it unspecified), and only it gets a gradient. An index outside [0, x.dim(axis)) is a
// run-time error naming its position in `index`. indexAdd sums through segmentSum's sort of the
// indices; indexCopy is a scatter at the indices broadcast to source's shape.
Tensor indexAdd(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis = 0, Loc loc = Loc::current());
Tensor indexCopy(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis = 0, Loc loc = Loc::current());

// One entry of an index into x, as NumPy's x[...] and LibTorch's x.index({...}) take them: an i32
// tensor (an advanced index), an integer (x[0], x[-1]: an index of one position, counted from
// the end when negative), a Slice of one axis (Python's start:stop:step, start and stop optional
// and counted from the end when negative, clamped to the axis as Python does; step 1 or more),
// `newAxis` (NumPy's None: a new axis of 1 there), or `ellipsis` (NumPy's ..., as many whole
// axes as the other entries leave). Axes after the last entry are taken whole.
struct Slice {
  explicit Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
                 int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};
struct EllipsisIndex {};
inline constexpr EllipsisIndex ellipsis{};
struct NewAxisIndex {};
inline constexpr NewAxisIndex newAxis{};

class TensorIndex {
 public:
  enum class Kind { Tensor, Integer, Slice, NewAxis, Ellipsis };
  TensorIndex(Tensor index) : kind_(Kind::Tensor), tensor_(std::move(index)) {}  // NOLINT: implicit, as in x[i]
  TensorIndex(Array index) : TensorIndex(Tensor(std::move(index))) {}              // NOLINT
  TensorIndex(int64_t position) : kind_(Kind::Integer), integer_(position) {}      // NOLINT
  TensorIndex(int position) : TensorIndex(int64_t(position)) {}                    // NOLINT
  TensorIndex(Slice slice) : kind_(Kind::Slice), slice_(slice) {}                  // NOLINT
  TensorIndex(NewAxisIndex) : kind_(Kind::NewAxis) {}                              // NOLINT
  TensorIndex(EllipsisIndex) : kind_(Kind::Ellipsis) {}                            // NOLINT
  Kind kind() const { return kind_; }
  const Tensor& tensor() const { return tensor_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }

 private:
  Kind kind_;
  Tensor tensor_;
  int64_t integer_ = 0;
  Slice slice_;
};

// x[index] with NumPy's rules, which jax follows (x[i, j], x[:, i], x[..., i], x[1:5:2, i],
// x[0], x[:, None]). The i32 tensors and integers broadcast together (NumPy's rules; an integer
// is one of shape []) to a shape B: element b takes, on each indexed axis, its tensor's entry at
// b. The result's axes: B where the tensors and integers stand when no slice, new axis or
// ellipsis lies between them, else B first, then the sliced axes' lengths and the new axes in
// order, then the axes after the last entry. So an integer alone removes its axis, as in
// NumPy; among tensors it counts as one of them where torch selects first (x[:, 0, :, i] is
// [B, x.dim(0), x.dim(2)] here and in NumPy, [x.dim(0), x.dim(2), B] in torch). A tensor's entry
// must lie in [0, x.dim(axis)); one that does not is a run-time error naming its position in its
// tensor and the range, at the caller's line. An integer outside the axis, or a slice that
// selects nothing, is an error while tracing. The gradient adds up the cotangents of repeated
// positions. Without tensors, and with steps of 1, the slice op.
Tensor indexGet(const Tensor& x, const std::vector<TensorIndex>& index, Loc loc = Loc::current());

// indexGet's inverse: x with `values` written (accumulate false: jnp's x.at[...].set, torch's
// x[...] = values and index_put) or added (accumulate true: x.at[...].add,
// index_put(accumulate=True)) at the positions x[index] reads; values broadcast to the shape
// x[index] has, in x's dtype. Repeated positions add up in index order when accumulating;
// written, the last in index order (the result's row-major order) wins (torch and jax leave it
// unspecified) and only it gets a gradient, x's gradient masked where anything was written. Bad
// entries as indexGet's. Every entry up to the last tensor or partial slice made an i32 index
// laid out along its result axes, the positions one index into x's leading axes flattened (sum
// of index a times its stride, in f64), then indexCopy or indexAdd along that axis.
Tensor indexPut(const Tensor& x, const std::vector<TensorIndex>& index, const Tensor& values, bool accumulate = false,
                Loc loc = Loc::current());

// The index tensors of x's leading axes as a vector (not a braced list, which the overloads
// above take).
template <class T>
  requires std::same_as<T, Tensor>
Tensor indexGet(const Tensor& x, const std::vector<T>& indices, Loc loc = Loc::current()) {
  return indexGet(x, std::vector<TensorIndex>(indices.begin(), indices.end()), loc);
}
template <class T>
  requires std::same_as<T, Tensor>
Tensor indexPut(const Tensor& x, const std::vector<T>& indices, const Tensor& values, bool accumulate = false,
                Loc loc = Loc::current()) {
  return indexPut(x, std::vector<TensorIndex>(indices.begin(), indices.end()), values, accumulate, loc);
}

namespace detail {
// Zeros of `index`'s shape in the float `dtype`, read at each i32 index from `bound` zeros: an
// index outside [0, bound) stops the run with take_along_axis's error naming its position in
// `index` (flattened), at `loc`. Added to or subtracted from a value the result needs, they
// make a composed function's check part of its graph: x - 0 is x's bits (-0 and NaN
// included), as is x + 0 for every x but -0.
Tensor indexCheckZeros(const Tensor& index, int64_t bound, DType dtype, Loc loc);
}  // namespace detail

}  // namespace spmd
