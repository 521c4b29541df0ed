#include "frontend/Indexing.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "frontend/Checks.h"
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
  const int64_t rank = x.rank(), at = detail::checkedAxis(x, axis, "take", loc);
  if (indices.dtype() != DType::i32)
    throw Error(where(loc) + ": spmd::take: indices must be i32, got " + indices.typeString() +
                " (cast them: spmd::cast(indices, DType::i32))");
  // i32 values (labels, ids) by way of f64, which holds every one exactly.
  if (x.dtype() == DType::i32) return cast(take(cast(x, DType::f64, loc), indices, axis, loc), DType::i32, loc);
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
  const int64_t a = detail::checkedAxis(x, axis, name, loc);
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

// A sum of i32 values would wrap where jax's does and saturate or round where a float's does:
// neither is what a user adding ids means, so it is refused.
void refuseI32Sums(const char* name, const Tensor& x, Loc loc) {
  if (x.dtype() == DType::i32)
    throw Error(where(loc) + ": spmd::" + name + ": adding i32 values is not supported (x " + x.typeString() +
                "); cast x and the values to f32 or f64 first (spmd::cast), or write them (accumulate = false)");
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
  refuseI32Sums("indexAdd", x, loc);
  const int64_t a = indexAxis("indexAdd", x, index, source, axis, loc);
  if (a == 0) return add(x, segmentSum(source, index, x.dim(0), loc), loc);
  const auto [front, inverse] = axisFirst(x.rank(), a);
  return add(x, transpose(segmentSum(transpose(source, front, loc), index, x.dim(a), loc), inverse, loc), loc);
}

Tensor indexCopy(const Tensor& x, const Tensor& index, const Tensor& source, int64_t axis, Loc loc) {
  whileTracing("indexCopy", loc);
  if (x.dtype() == DType::i32 && source.dtype() == DType::i32)  // by way of f64, exactly
    return cast(indexCopy(cast(x, DType::f64, loc), index, cast(source, DType::f64, loc), axis, loc), DType::i32, loc);
  const int64_t a = indexAxis("indexCopy", x, index, source, axis, loc);
  // The index checked as given, so that an error names its position in `index` (the scatter's
  // check would name it in the broadcast indices).
  Shape along(size_t(x.rank()), 1);
  along[size_t(a)] = index.dim(0);
  const Tensor checked = reshape(detail::indexCheckZeros(index, x.dim(a), x.dtype(), loc), along, loc);
  return scatter(x, broadcastTo(reshape(index, along, loc), source.shape(), loc), sub(source, checked, loc), a, loc);
}

namespace {

// An index with its ellipsis expanded into whole slices and each new axis made a whole slice of
// an axis of 1 inserted into x there: one entry per axis of `x` (reshaped when new axes were
// asked for) up to the last entry, each remembering its place in the caller's index.
struct Normalized {
  Tensor x;
  std::vector<TensorIndex> entries;
  std::vector<int64_t> given;  // the caller's entry of each (for messages)
  bool tensors = false;        // any index tensor among the caller's entries
};

Normalized normalize(const char* name, const Tensor& x, const std::vector<TensorIndex>& index, Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const int64_t rank = x.rank();
  int64_t ellipses = 0, consuming = 0;
  for (const TensorIndex& e : index) {
    ellipses += e.kind() == TensorIndex::Kind::Ellipsis;
    consuming += e.kind() != TensorIndex::Kind::Ellipsis && e.kind() != TensorIndex::Kind::NewAxis;
  }
  if (ellipses > 1) throw Error(at + "the index holds " + std::to_string(ellipses) + " ellipses; give at most one");
  if (int64_t(index.size()) == ellipses || consuming > rank)
    throw Error(at + "give from 1 to " + std::to_string(rank) + " index tensors, integers or slices, one for each of x " +
                x.typeString() + "'s leading axes (an ellipsis stands for the axes between, newAxis for none), got " +
                std::to_string(consuming));
  Normalized n;
  Shape shape;
  int64_t axis = 0;
  for (size_t k = 0; k < index.size(); ++k) {
    const TensorIndex& e = index[k];
    switch (e.kind()) {
      case TensorIndex::Kind::Ellipsis:
        for (int64_t d = 0; d < rank - consuming; ++d) {
          n.entries.emplace_back(Slice());
          n.given.push_back(int64_t(k));
          shape.push_back(x.dim(axis++));
        }
        continue;
      case TensorIndex::Kind::NewAxis:
        n.entries.emplace_back(Slice());
        shape.push_back(1);
        break;
      case TensorIndex::Kind::Integer: {
        const int64_t size = x.dim(axis), v = e.integer() < 0 ? e.integer() + size : e.integer();
        if (v < 0 || v >= size)
          throw Error(at + "index[" + std::to_string(k) + "] = " + std::to_string(e.integer()) + " is outside axis " +
                      std::to_string(axis) + " of x " + x.typeString() + " (size " + std::to_string(size) +
                      "; negative integers count from the end)");
        n.entries.emplace_back(v);
        shape.push_back(x.dim(axis++));
        break;
      }
      default:
        n.tensors = n.tensors || e.kind() == TensorIndex::Kind::Tensor;
        n.entries.push_back(e);
        shape.push_back(x.dim(axis++));
    }
    n.given.push_back(int64_t(k));
  }
  for (; axis < rank; ++axis) shape.push_back(x.dim(axis));
  n.x = shape == x.shape() ? x : reshape(x, shape, loc);
  return n;
}

// An index's entries laid out over x's axes: for each axis up to the last one that is not taken
// whole, an i32 tensor whose shape broadcasts to the result's leading axes (`lead`): an index
// tensor reshaped so that B lies where NumPy puts it, an integer as a tensor of shape [], a
// slice's positions (start + step k) along its own result axis. Checked at the caller's line.
struct Layout {
  std::vector<Tensor> indices;
  std::vector<bool> known;  // from a slice or an integer: in range by construction, no run-time check
  Shape lead;
  bool unitSteps = true;              // every slice's step is 1
  std::vector<int64_t> start, limit;  // per axis of x: the slices' and integers' ranges (whole for the others)
};

Layout layoutOf(const char* name, const Normalized& n, Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const Tensor& x = n.x;
  const size_t axes = n.entries.size();
  Layout l;
  l.start.assign(size_t(x.rank()), 0);
  l.limit = x.shape();
  // B, the tensors' and integers' broadcast shape, and each sliced axis' length.
  Shape batch, length(axes), step(axes, 1);
  std::vector<bool> tensor(axes);
  for (size_t a = 0; a < axes; ++a) {
    const TensorIndex& e = n.entries[a];
    const std::string which = "index[" + std::to_string(n.given[a]) + "]";
    const int64_t size = x.dim(int64_t(a));
    if (e.kind() == TensorIndex::Kind::Slice) {
      const Slice& s = e.slice();
      if (s.step < 1)
        throw Error(at + which + " has step " + std::to_string(s.step) +
                    "; steps must be 1 or more (torch's rule too: reverse an axis by an index tensor)");
      // Python's rules: negative counts from the end, then clamped to [0, size].
      auto place = [size](std::optional<int64_t> v, int64_t otherwise) {
        if (!v) return otherwise;
        return std::clamp<int64_t>(*v < 0 ? *v + size : *v, 0, size);
      };
      const int64_t from = place(s.start, 0), to = place(s.stop, size);
      length[a] = to > from ? 1 + (to - from - 1) / s.step : 0;  // no overflow for any step
      if (length[a] == 0)
        throw Error(at + which + " selects nothing of an axis of " + std::to_string(size) + " (x " + x.typeString() +
                    "): start " + std::to_string(from) + ", stop " + std::to_string(to) +
                    " after Python's rules; an index must select at least one element of every axis");
      step[a] = s.step;
      l.start[a] = from, l.limit[a] = from + (length[a] - 1) * s.step + 1;
      l.unitSteps = l.unitSteps && s.step == 1;
      continue;
    }
    tensor[a] = true;
    if (e.kind() == TensorIndex::Kind::Integer) {
      l.start[a] = e.integer(), l.limit[a] = e.integer() + 1;
      continue;  // shape []: B unchanged
    }
    const Tensor& index = e.tensor();
    if (index.dtype() != DType::i32)
      throw Error(at + "indices[" + std::to_string(n.given[a]) + "] " + index.typeString() +
                  " must be i32 (cast it: spmd::cast(index, DType::i32))");
    const Shape& shape = index.shape();
    const size_t r = std::max(batch.size(), shape.size());
    Shape joined(r);
    for (size_t d = 0; d < r; ++d) {
      const int64_t u = d < r - batch.size() ? 1 : batch[d - (r - batch.size())];
      const int64_t v = d < r - shape.size() ? 1 : shape[d - (r - shape.size())];
      if (u != v && u != 1 && v != 1)
        throw Error(at + "indices[" + std::to_string(n.given[a]) + "] " + index.typeString() +
                    " does not broadcast with the indices before it (together " + shapeString(batch) +
                    "): every index tensor names a position's coordinate along its axis, so their shapes must broadcast");
      joined[d] = std::max(u, v);
    }
    batch = joined;
  }
  // NumPy's placement of B: where the tensors stand when they are adjacent, else first.
  const auto first = std::find(tensor.begin(), tensor.end(), true);
  const bool anyTensor = first != tensor.end();
  const size_t firstTensor = size_t(first - tensor.begin());
  const size_t lastTensor = anyTensor ? axes - 1 - size_t(std::find(tensor.rbegin(), tensor.rend(), true) - tensor.rbegin()) : 0;
  const bool adjacent = anyTensor && size_t(std::count(tensor.begin(), tensor.end(), true)) == lastTensor - firstTensor + 1;
  // Whole slices after the last entry that is not need no index (positionsOf's rest).
  size_t indexed = axes;
  while (indexed > 1 && !tensor[indexed - 1] && length[indexed - 1] == x.dim(int64_t(indexed) - 1)) --indexed;
  std::vector<int64_t> placeOf(indexed, -1);  // a sliced axis' place in lead
  size_t batchAt = 0;                          // B's first place in lead
  if (anyTensor && !adjacent) l.lead = batch;
  for (size_t a = 0; a < indexed; ++a) {
    if (tensor[a]) {
      if (a == firstTensor && adjacent) batchAt = l.lead.size(), l.lead.insert(l.lead.end(), batch.begin(), batch.end());
      continue;
    }
    placeOf[a] = int64_t(l.lead.size());
    l.lead.push_back(length[a]);
  }
  for (size_t a = 0; a < indexed; ++a) {
    Shape laid(l.lead.size(), 1);
    const TensorIndex& e = n.entries[a];
    if (!tensor[a] || e.kind() == TensorIndex::Kind::Integer) {
      std::vector<int32_t> positions(size_t(tensor[a] ? 1 : length[a]));
      for (size_t k = 0; k < positions.size(); ++k) positions[k] = int32_t(l.start[a] + int64_t(k) * step[a]);
      if (!tensor[a]) laid[size_t(placeOf[a])] = length[a];
      l.indices.push_back(reshape(Tensor(Array::of<int32_t>({int64_t(positions.size())}, positions)), laid, loc));
      l.known.push_back(true);
      continue;
    }
    // The index's own axes end B's.
    const Tensor& index = e.tensor();
    for (int64_t d = 0; d < index.rank(); ++d) laid[batchAt + batch.size() - size_t(index.rank()) + size_t(d)] = index.dim(d);
    l.indices.push_back(reshape(index, laid, loc));
    l.known.push_back(false);
  }
  return l;
}

// indexGet's and indexPut's positions: the layout's indices, broadcast together, each position
// made one index into x's first k axes flattened.
struct Positions {
  Shape batch;          // the result's leading axes (the layout's lead)
  Shape rest;           // x's axes from k on
  int64_t places = 1;   // the elements of x's first k axes, which the flat index counts
  Tensor flat;          // i32 [numel(batch)]
};

Positions positionsOf(const char* name, const Tensor& x, const Layout& l, Loc loc) {
  const int64_t k = int64_t(l.indices.size());
  Positions p;
  p.batch = l.lead;
  for (int64_t a = 0; a < k; ++a) p.places *= x.dim(a);
  if (p.places > std::numeric_limits<int32_t>::max())
    throw Error(where(loc) + ": spmd::" + name + ": x " + x.typeString() + "'s first " + std::to_string(k) +
                " axes hold " + std::to_string(p.places) + " places, more than an i32 index reaches (2^31 - 1): index fewer axes");
  for (int64_t d = k; d < x.rank(); ++d) p.rest.push_back(x.dim(d));
  // sum over a of index a times the elements of the axes after it, in f64 (exact below 2^53),
  // each index tensor plus its check's zeros (a bad entry stops the run naming its place in it).
  Tensor sum;
  int64_t stride = 1;
  for (int64_t a = k - 1; a >= 0; --a) {
    const Tensor& index = l.indices[size_t(a)];
    Tensor term = cast(index, DType::f64, loc);
    if (!l.known[size_t(a)]) term = add(term, detail::indexCheckZeros(index, x.dim(a), DType::f64, loc), loc);
    if (stride != 1) term = mul(term, double(stride), loc);
    term = broadcastTo(term, p.batch, loc);
    sum = a == k - 1 ? term : add(sum, term, loc);
    stride *= x.dim(a);
  }
  p.flat = cast(reshape(sum, {numElements(p.batch)}, loc), DType::i32, loc);
  return p;
}

}  // namespace

Tensor indexGet(const Tensor& x, const std::vector<TensorIndex>& index, Loc loc) {
  whileTracing("indexGet", loc);
  const Normalized n = normalize("indexGet", x, index, loc);
  const Layout l = layoutOf("indexGet", n, loc);
  Shape picked = l.lead;
  for (int64_t d = int64_t(l.indices.size()); d < n.x.rank(); ++d) picked.push_back(n.x.dim(d));
  if (!n.tensors && l.unitSteps) return reshape(slice(n.x, l.start, l.limit, loc), picked, loc);
  const Positions p = positionsOf("indexGet", n.x, l, loc);
  Shape flatShape = p.rest;
  flatShape.insert(flatShape.begin(), p.places);
  return reshape(take(reshape(n.x, flatShape, loc), p.flat, 0, loc), picked, loc);
}

Tensor indexPut(const Tensor& x, const std::vector<TensorIndex>& index, const Tensor& values, bool accumulate, Loc loc) {
  whileTracing("indexPut", loc);
  if (accumulate) refuseI32Sums("indexPut", x, loc);
  const Normalized n = normalize("indexPut", x, index, loc);
  const Layout l = layoutOf("indexPut", n, loc);
  const Positions p = positionsOf("indexPut", n.x, l, loc);
  Shape target = p.batch;
  target.insert(target.end(), p.rest.begin(), p.rest.end());
  bool fits = values.rank() <= int64_t(target.size()) && values.dtype() == x.dtype();
  for (int64_t d = 0; fits && d < values.rank(); ++d) {
    const int64_t v = values.dim(d), t = target[target.size() - size_t(values.rank()) + size_t(d)];
    fits = v == t || v == 1;
  }
  if (!fits)
    throw Error(where(loc) + ": spmd::indexPut: values " + values.typeString() + " must broadcast to " +
                shapeString(target) + ", the shape x " + x.typeString() + "[index] has, in x's dtype");
  Shape flatShape = p.rest, rows = p.rest;
  flatShape.insert(flatShape.begin(), p.places);
  rows.insert(rows.begin(), numElements(p.batch));
  const Tensor flatX = reshape(n.x, flatShape, loc);
  const Tensor flatValues = reshape(broadcastTo(values, target, loc), rows, loc);
  const Tensor put = accumulate ? indexAdd(flatX, p.flat, flatValues, 0, loc) : indexCopy(flatX, p.flat, flatValues, 0, loc);
  return reshape(put, x.shape(), loc);
}

}  // namespace spmd
