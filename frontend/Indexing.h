// Indexing by i32 tensors, composed of the dialect's lookups and scatters (embedding,
// take_along_axis, scatter, segment sums), with no kernels of their own: take (jnp.take), its
// inverses indexAdd / indexCopy along one axis, and NumPy's advanced indexing over x's leading
// axes, x[i, j] (indexGet) and x.at[i, j].set / .add (indexPut, torch's index_put). An index out
// of range is a run-time error at the caller's line naming its position in the index tensor it
// came from (jax clamps a lookup and drops an update). Checked against PyTorch in f64 with their
// gradients (ComposedTorchTest).
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// Slices of x at the i32 `indices` along `axis` (jnp.take; torch.index_select for 1-D indices):
// the result's shape is x's with `axis` replaced by the indices' shape. An index outside
// [0, x.dim(axis)) is a run-time error naming its position, as `embedding`'s (which this is, on
// x with `axis` moved first); the gradient sums the slices of repeated indices.
Tensor take(const Tensor& x, const Tensor& indices, int64_t axis, Loc loc = Loc::current());

// take's inverses: x with the slices of `source` added (torch.index_add, jnp's x.at[index].add)
// or written (torch.index_copy, x.at[index].set) at the i32 `index` [K] along `axis`; source is
// x's shape with K along the axis. Repeated indices add up; written, the last one wins (torch
// leaves it unspecified), and only it gets a gradient. An index outside [0, x.dim(axis)) is a
// run-time error naming its position in `index`. indexAdd sums through segmentSum's sort of the
// indices; indexCopy is a scatter at the indices broadcast to source's shape.
Tensor indexAdd(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis = 0, Loc loc = Loc::current());
Tensor indexCopy(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis = 0, Loc loc = Loc::current());

// Advanced indexing over x's first k axes by k i32 tensors (1 <= k <= x's rank), broadcast
// together (NumPy's rules) to a shape B: element b of the result is x[indices[0][b], ...,
// indices[k-1][b], ...], the result B followed by x's axes from k on (jnp's x[i, j],
// torch's x[i, j] and aten::index). Index a's entries must lie in [0, x.dim(a)); one that does
// not is a run-time error naming its position in indices[a] and the range, at the caller's line.
// The gradient adds up the cotangents of repeated positions.
Tensor indexGet(const Tensor& x, const std::vector<Tensor>& indices, Loc loc = Loc::current());

// indexGet's inverse: x with `values` written (accumulate false: jnp's x.at[i, j].set,
// torch.index_put) or added (accumulate true: x.at[i, j].add, index_put(accumulate=True)) at
// the positions the k indices name, broadcast as indexGet's; values broadcast to B followed by
// x's axes from k on, in x's dtype. Repeated positions add up in index order when accumulating;
// written, the last in index order (B's row-major order) wins (torch and jax leave it
// unspecified) and only it gets a gradient, x's gradient masked where anything was written.
// Bad indices as indexGet's. x flattened over its first k axes, the positions as one index
// (sum of index a times its stride, in f64), then indexCopy or indexAdd along that axis.
Tensor indexPut(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false,
                Loc loc = Loc::current());

namespace detail {
// Zeros of `index`'s shape in the float `dtype`, read at each i32 index from `bound` zeros: an
// index outside [0, bound) stops the run with take_along_axis's error naming its position in
// `index` (flattened), at `loc`. Added to or subtracted from a value the result needs, they
// make a composed function's check part of its graph: x - 0 is x's bits (-0 and NaN
// included), as is x + 0 for every x but -0.
Tensor indexCheckZeros(const Tensor& index, int64_t bound, DType dtype, Loc loc);
}  // namespace detail

}  // namespace spmd
