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

// An index's entries laid out over x's axes: for each axis up to the last one that is not taken
// whole, an i32 tensor whose shape broadcasts to the result's leading axes (`lead`): an index
// tensor reshaped so that B lies where NumPy puts it, a slice's positions (start + step k) along
// its own result axis. Checked at the caller's line.
struct Layout {
  std::vector<Tensor> indices;
  std::vector<bool> fromSlice;  // in range by construction: no run-time check
  Shape lead;
  bool tensors = false;         // any index tensor among the entries
  bool unitSteps = true;        // every slice's step is 1
  std::vector<int64_t> start, limit;  // per axis of x: the slices' ranges (whole for the other axes)
};

Layout layoutOf(const char* name, const Tensor& x, const std::vector<TensorIndex>& entries, Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const int64_t rank = x.rank();
  int64_t ellipses = 0;
  for (const TensorIndex& e : entries) ellipses += e.kind() == TensorIndex::Kind::Ellipsis;
  const int64_t given = int64_t(entries.size()) - ellipses;
  if (ellipses > 1) throw Error(at + "the index holds " + std::to_string(ellipses) + " ellipses; give at most one");
  if (given < 1 || given > rank)
    throw Error(at + "give from 1 to " + std::to_string(rank) + " index tensors or slices, one for each of x " +
                x.typeString() + "'s leading axes (an ellipsis stands for the axes between), got " +
                std::to_string(given));
  // The entry of each axis: its position in `entries`, or -1 for an axis the ellipsis stands for.
  std::vector<int64_t> entryOf;
  for (size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].kind() != TensorIndex::Kind::Ellipsis) entryOf.push_back(int64_t(k));
    else entryOf.insert(entryOf.end(), size_t(rank - given), -1);
  }
  Layout l;
  l.start.assign(size_t(rank), 0);
  l.limit = x.shape();
  // B, the index tensors' broadcast shape, and each sliced axis' length.
  Shape batch;
  std::vector<int64_t> tensorAxes;
  Shape length(entryOf.size()), step(entryOf.size(), 1);
  for (size_t a = 0; a < entryOf.size(); ++a) {
    const int64_t n = x.dim(int64_t(a));
    if (entryOf[a] < 0) {
      length[a] = n;
      continue;
    }
    const TensorIndex& e = entries[size_t(entryOf[a])];
    const std::string which = "index[" + std::to_string(entryOf[a]) + "]";
    if (e.kind() == TensorIndex::Kind::Slice) {
      const Slice& s = e.slice();
      if (s.step < 1)
        throw Error(at + which + " (axis " + std::to_string(a) + ") has step " + std::to_string(s.step) +
                    "; steps must be 1 or more (torch's rule too: reverse an axis by an index tensor)");
      // Python's rules: negative counts from the end, then clamped to [0, n].
      auto place = [n](std::optional<int64_t> v, int64_t otherwise) {
        if (!v) return otherwise;
        const int64_t p = *v < 0 ? *v + n : *v;
        return std::clamp<int64_t>(p, 0, n);
      };
      const int64_t from = place(s.start, 0), to = place(s.stop, n);
      length[a] = to > from ? (to - from + s.step - 1) / s.step : 0;
      if (length[a] == 0)
        throw Error(at + which + " (axis " + std::to_string(a) + " of x " + x.typeString() + ") selects nothing: " +
                    "start " + std::to_string(from) + ", stop " + std::to_string(to) +
                    " after Python's rules; an index must select at least one element of every axis");
      step[a] = s.step;
      l.start[a] = from, l.limit[a] = from + (length[a] - 1) * s.step + 1;
      l.unitSteps = l.unitSteps && s.step == 1;
      continue;
    }
    const Tensor& index = e.tensor();
    if (index.dtype() != DType::i32)
      throw Error(at + "indices[" + std::to_string(entryOf[a]) + "] " + index.typeString() +
                  " must be i32 (cast it: spmd::cast(index, DType::i32))");
    const Shape& shape = index.shape();
    const size_t r = std::max(batch.size(), shape.size());
    Shape joined(r);
    for (size_t d = 0; d < r; ++d) {
      const int64_t u = d < r - batch.size() ? 1 : batch[d - (r - batch.size())];
      const int64_t v = d < r - shape.size() ? 1 : shape[d - (r - shape.size())];
      if (u != v && u != 1 && v != 1)
        throw Error(at + "indices[" + std::to_string(entryOf[a]) + "] " + index.typeString() +
                    " does not broadcast with the indices before it (together " + shapeString(batch) +
                    "): every index tensor names a position's coordinate along its axis, so their shapes must broadcast");
      joined[d] = std::max(u, v);
    }
    batch = joined;
    tensorAxes.push_back(int64_t(a));
  }
  l.tensors = !tensorAxes.empty();
  // Axes taken whole after the last entry that is not need no index (indexGet's rest).
  size_t axes = entryOf.size();
  auto whole = [&](size_t a) { return entryOf[a] < 0 || (entries[size_t(entryOf[a])].kind() == TensorIndex::Kind::Slice &&
                                                         length[a] == x.dim(int64_t(a))); };
  while (axes > 1 && whole(axes - 1)) --axes;
  // NumPy's placement of B: where the tensors stand when they are adjacent, else first.
  const bool adjacent = l.tensors && tensorAxes.back() - tensorAxes.front() + 1 == int64_t(tensorAxes.size());
  const int64_t batchAt = !l.tensors ? 0 : adjacent ? tensorAxes.front() : 0;
  std::vector<int64_t> placeOf(axes, -1);  // a sliced axis' place in lead
  for (size_t a = 0; a < axes; ++a) {
    const bool tensor = std::count(tensorAxes.begin(), tensorAxes.end(), int64_t(a)) > 0;
    if (tensor) {
      if (int64_t(l.lead.size()) == batchAt) l.lead.insert(l.lead.end(), batch.begin(), batch.end());
      continue;
    }
    if (l.tensors && !adjacent && l.lead.empty()) l.lead = batch;
    placeOf[a] = int64_t(l.lead.size());
    l.lead.push_back(length[a]);
  }
  for (size_t a = 0; a < axes; ++a) {
    Shape laid(l.lead.size(), 1);
    if (placeOf[a] >= 0) {
      laid[size_t(placeOf[a])] = length[a];
      std::vector<int32_t> positions(size_t(length[a]));
      for (int64_t k = 0; k < length[a]; ++k) positions[size_t(k)] = int32_t(l.start[a] + k * step[a]);
      l.indices.push_back(reshape(Tensor(Array::of<int32_t>({length[a]}, positions)), laid, loc));
      l.fromSlice.push_back(true);
      continue;
    }
    const Tensor& index = entries[size_t(entryOf[a])].tensor();
    // B's axes begin at the place the first tensor axis took; the index's own axes end B.
    const size_t bAt = size_t(adjacent ? std::count_if(placeOf.begin(), placeOf.begin() + tensorAxes.front(),
                                                       [](int64_t p) { return p >= 0; })
                                       : 0);
    for (int64_t d = 0; d < index.rank(); ++d) laid[bAt + batch.size() - size_t(index.rank()) + size_t(d)] = index.dim(d);
    l.indices.push_back(reshape(index, laid, loc));
    l.fromSlice.push_back(false);
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
    if (!l.fromSlice[size_t(a)]) term = add(term, detail::indexCheckZeros(index, x.dim(a), DType::f64, loc), loc);
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
  const Layout l = layoutOf("indexGet", x, index, loc);
  if (!l.tensors && l.unitSteps) return slice(x, l.start, l.limit, loc);
  const Positions p = positionsOf("indexGet", x, l, loc);
  Shape flatShape = p.rest, picked = p.batch;
  flatShape.insert(flatShape.begin(), p.places);
  picked.insert(picked.end(), p.rest.begin(), p.rest.end());
  return reshape(take(reshape(x, flatShape, loc), p.flat, 0, loc), picked, loc);
}

Tensor indexPut(const Tensor& x, const std::vector<TensorIndex>& index, const Tensor& values, bool accumulate, Loc loc) {
  whileTracing("indexPut", loc);
  const Layout l = layoutOf("indexPut", x, index, loc);
  const Positions p = positionsOf("indexPut", x, l, loc);
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
  const Tensor flatX = reshape(x, flatShape, loc);
  const Tensor flatValues = reshape(broadcastTo(values, target, loc), rows, loc);
  const Tensor put = accumulate ? indexAdd(flatX, p.flat, flatValues, 0, loc) : indexCopy(flatX, p.flat, flatValues, 0, loc);
  return reshape(put, x.shape(), loc);
}

}  // namespace spmd
