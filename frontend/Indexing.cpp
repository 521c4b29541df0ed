#include "frontend/Indexing.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::Trace;
using detail::where;

namespace {

// Checks that `name` is called while tracing (the error names it, not the ops it is made of).
void whileTracing(const char* name, Loc loc) { Trace::current(name, loc); }

}  // namespace

Tensor detail::indexCheckZeros(const Tensor& index, int64_t bound, DType dtype, Loc loc) {
  const Tensor zeros = broadcastTo(Tensor(Array::zeros(dtype == DType::f64 ? DType::f64 : DType::f32, {1})), {bound}, loc);
  const Tensor read = takeAlongAxis(zeros, reshape(index, {index.numel()}, loc), 0, loc);
  return reshape(read.dtype() == dtype ? read : cast(read, dtype, loc), index.shape(), loc);
}

Tensor take(const Tensor& x, const Tensor& indices, int64_t axis, Loc loc) {
  whileTracing("take", loc);
  const int64_t rank = x.rank(), at = axis < 0 ? axis + rank : axis;
  if (at < 0 || at >= rank)
    throw Error(where(loc) + ": spmd::take: axis " + std::to_string(axis) + " is outside x " + x.typeString() +
                " (rank " + std::to_string(rank) + "; negative axes count from the end)");
  if (indices.dtype() != DType::i32)
    throw Error(where(loc) + ": spmd::take: indices must be i32, got " + indices.typeString() +
                " (cast them: spmd::cast(indices, DType::i32))");
  // x with `axis` first, as a [x.dim(axis), rest] table whose rows embedding picks.
  std::vector<int64_t> front = {at};
  Shape rest;
  for (int64_t d = 0; d < rank; ++d)
    if (d != at) front.push_back(d), rest.push_back(x.dim(d));
  const Tensor moved = at == 0 ? x : transpose(x, front, loc);
  const Tensor rows = embedding(reshape(moved, {x.dim(at), numElements(rest)}, loc), indices, loc);
  Shape picked = indices.shape();
  picked.insert(picked.end(), rest.begin(), rest.end());
  const Tensor y = reshape(rows, picked, loc);  // [indices..., x's other axes]
  if (at == 0) return y;
  // The indices' axes back where `axis` was.
  const int64_t k = indices.rank();
  std::vector<int64_t> back;
  for (int64_t d = 0; d < at; ++d) back.push_back(k + d);
  for (int64_t d = 0; d < k; ++d) back.push_back(d);
  for (int64_t d = at + 1; d < rank; ++d) back.push_back(k + d - 1);
  return transpose(y, back, loc);
}

namespace {

// indexAdd's and indexCopy's operands checked (at the caller's line); returns the axis counted
// from the front.
int64_t indexAxis(const char* name, const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis, Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const int64_t rank = x.rank(), a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw Error(at + "axis " + std::to_string(axis) + " is outside x " + x.typeString() + " (rank " +
                std::to_string(rank) + "; negative axes count from the end)");
  if (index.dtype() != DType::i32 || index.rank() != 1)
    throw Error(at + "index must be i32 of one axis, got " + index.typeString());
  Shape want = x.shape();
  want[size_t(a)] = index.dim(0);
  if (source.shape() != want || source.dtype() != x.dtype())
    throw Error(at + "source " + source.typeString() + " must be x " + x.typeString() + " with " +
                std::to_string(index.dim(0)) + " (index's size) along axis " + std::to_string(a) + ", i.e. " +
                shapeString(want) + " of x's dtype");
  return a;
}

// The permutation that brings `axis` first, and its inverse.
std::pair<std::vector<int64_t>, std::vector<int64_t>> axisFirst(int64_t rank, int64_t axis) {
  std::vector<int64_t> front = {axis}, inverse(static_cast<size_t>(rank), 0);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) front.push_back(d);
  for (int64_t d = 0; d < rank; ++d) inverse[size_t(front[size_t(d)])] = d;
  return {front, inverse};
}

}  // namespace

Tensor indexAdd(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis, Loc loc) {
  whileTracing("indexAdd", loc);
  const int64_t a = indexAxis("indexAdd", x, index, source, axis, loc);
  if (a == 0) return add(x, segmentSum(source, index, x.dim(0), loc), loc);
  const auto [front, inverse] = axisFirst(x.rank(), a);
  return add(x, transpose(segmentSum(transpose(source, front, loc), index, x.dim(a), loc), inverse, loc), loc);
}

Tensor indexCopy(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis, Loc loc) {
  whileTracing("indexCopy", loc);
  const int64_t a = indexAxis("indexCopy", x, index, source, axis, loc);
  // The index checked as given, so that an error names its position in `index` (the scatter's
  // check would name it in the broadcast indices).
  Shape along(size_t(x.rank()), 1);
  along[size_t(a)] = index.dim(0);
  const Tensor checked = reshape(detail::indexCheckZeros(index, x.dim(a), x.dtype(), loc), along, loc);
  return scatter(x, broadcastTo(reshape(index, along, loc), source.shape(), loc), sub(source, checked, loc), a, loc);
}

namespace {

// indexGet's and indexPut's positions: the indices checked at the caller's line, broadcast
// together, and each position made one index into x's first k axes flattened.
struct Positions {
  Shape batch;          // B: the indices' broadcast shape
  Shape rest;           // x's axes from k on
  int64_t places = 1;   // the elements of x's first k axes, which the flat index counts
  Tensor flat;          // i32 [numel(B)]
};

Positions positionsOf(const char* name, const Tensor& x, const std::vector<Tensor>& indices, Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const int64_t k = int64_t(indices.size());
  if (k < 1 || k > x.rank())
    throw Error(at + "give from 1 to " + std::to_string(x.rank()) + " index tensors, one for each of x " +
                x.typeString() + "'s leading axes, got " + std::to_string(k));
  Positions p;
  for (int64_t a = 0; a < k; ++a) {
    const Tensor& index = indices[size_t(a)];
    const std::string which = "indices[" + std::to_string(a) + "] " + index.typeString();
    if (index.dtype() != DType::i32)
      throw Error(at + which + " must be i32 (cast it: spmd::cast(index, DType::i32))");
    // NumPy broadcasting of B so far with this index's shape.
    const Shape& shape = index.shape();
    const size_t rank = std::max(p.batch.size(), shape.size());
    Shape joined(rank);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t u = d < rank - p.batch.size() ? 1 : p.batch[d - (rank - p.batch.size())];
      const int64_t v = d < rank - shape.size() ? 1 : shape[d - (rank - shape.size())];
      if (u != v && u != 1 && v != 1)
        throw Error(at + which + " does not broadcast with the indices before it (together " + shapeString(p.batch) +
                    "): every index tensor names a position's coordinate along its axis, so their shapes must broadcast");
      joined[d] = std::max(u, v);
    }
    p.batch = joined;
    p.places *= x.dim(a);
  }
  if (p.places > std::numeric_limits<int32_t>::max())
    throw Error(at + "x " + x.typeString() + "'s first " + std::to_string(k) + " axes hold " +
                std::to_string(p.places) + " places, more than an i32 index reaches (2^31 - 1): index fewer axes");
  for (int64_t d = k; d < x.rank(); ++d) p.rest.push_back(x.dim(d));
  // sum over a of index a times the elements of the axes after it, in f64 (exact below 2^53),
  // each index plus its check's zeros (a bad entry stops the run naming its place in indices[a]).
  Tensor sum;
  int64_t stride = 1;
  for (int64_t a = k - 1; a >= 0; --a) {
    const Tensor& index = indices[size_t(a)];
    Tensor term = add(cast(index, DType::f64, loc), detail::indexCheckZeros(index, x.dim(a), DType::f64, loc), loc);
    if (stride != 1) term = mul(term, double(stride), loc);
    term = broadcastTo(term, p.batch, loc);
    sum = a == k - 1 ? term : add(sum, term, loc);
    stride *= x.dim(a);
  }
  p.flat = cast(reshape(sum, {numElements(p.batch)}, loc), DType::i32, loc);
  return p;
}

}  // namespace

Tensor indexGet(const Tensor& x, const std::vector<Tensor>& indices, Loc loc) {
  whileTracing("indexGet", loc);
  const Positions p = positionsOf("indexGet", x, indices, loc);
  Shape flatShape = p.rest, picked = p.batch;
  flatShape.insert(flatShape.begin(), p.places);
  picked.insert(picked.end(), p.rest.begin(), p.rest.end());
  return reshape(take(reshape(x, flatShape, loc), p.flat, 0, loc), picked, loc);
}

Tensor indexPut(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate, Loc loc) {
  whileTracing("indexPut", loc);
  const Positions p = positionsOf("indexPut", x, indices, loc);
  Shape target = p.batch;
  target.insert(target.end(), p.rest.begin(), p.rest.end());
  bool fits = values.rank() <= int64_t(target.size()) && values.dtype() == x.dtype();
  for (int64_t d = 0; fits && d < values.rank(); ++d) {
    const int64_t v = values.dim(d), t = target[target.size() - size_t(values.rank()) + size_t(d)];
    fits = v == t || v == 1;
  }
  if (!fits)
    throw Error(where(loc) + ": spmd::indexPut: values " + values.typeString() + " must broadcast to " +
                shapeString(target) + " (the indices' broadcast shape " + shapeString(p.batch) +
                " followed by x " + x.typeString() + "'s axes from " + std::to_string(indices.size()) +
                " on) in x's dtype");
  Shape flatShape = p.rest, rows = p.rest;
  flatShape.insert(flatShape.begin(), p.places);
  rows.insert(rows.begin(), numElements(p.batch));
  const Tensor flatX = reshape(x, flatShape, loc);
  const Tensor flatValues = reshape(broadcastTo(values, target, loc), rows, loc);
  const Tensor put = accumulate ? indexAdd(flatX, p.flat, flatValues, 0, loc) : indexCopy(flatX, p.flat, flatValues, 0, loc);
  return reshape(put, x.shape(), loc);
}

}  // namespace spmd
