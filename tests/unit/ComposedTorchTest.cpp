// The composed functions of frontend/Composed.h beyond the activations (those are checked at
// edge values in ElementwiseTorchTest): min, logsumexp, variance, stddev, take, label-smoothed
// cross-entropy, nearest upsampling, clamp, cumsum, sort and topK (their stable order on ties too), and takeAlongAxis (torch.gather), scatterAdd
// (torch.scatter_add), scatter (torch.scatter) and scatterMax / scatterMin (torch.scatter_reduce), indexGet and
// indexPut (x[i, j], torch.index_put), against PyTorch's in f64,
// values and gradients within 1e-13 (tests/reference/torch_composed.py); logsumexp's infinities; the
// activation layers give their functions' bits; oneHot and arange by hand; bad arguments name the
// caller's line.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>

#include "TestUtil.h"
#include "TorchExchange.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::maxRelativeError;
using testing::randomArray;

// The index tensors of an advanced index, given as the rows of one i32 array [k, ...].
std::vector<Tensor> rowsOf(const Tensor& indices) {
  Shape row = indices.shape(), start(row.size(), 0), limit = row;
  row.erase(row.begin());
  std::vector<Tensor> rows;
  for (int64_t a = 0; a < indices.dim(0); ++a) {
    start[0] = a, limit[0] = a + 1;
    rows.push_back(reshape(slice(indices, start, limit), row));
  }
  return rows;
}

// The index a spec names, as tests/reference/torch_composed.py reads it: entries separated by
// commas, "..." an ellipsis, "n" a new axis, "a:b:c" a slice (parts optional), an integer,
// "tD.D..." the next index tensor of that shape cut from `flat`.
std::vector<TensorIndex> indexOf(const std::string& spec, const Tensor& flat) {
  std::vector<TensorIndex> entries;
  int64_t used = 0;
  auto numbers = [](const std::string& text, char separator) {
    std::vector<std::optional<int64_t>> parts;
    size_t from = 0;
    for (size_t to; (to = text.find(separator, from)) != std::string::npos; from = to + 1)
      parts.push_back(to > from ? std::optional<int64_t>(std::stoll(text.substr(from, to - from))) : std::nullopt);
    parts.push_back(from < text.size() ? std::optional<int64_t>(std::stoll(text.substr(from))) : std::nullopt);
    return parts;
  };
  size_t from = 0;
  while (from <= spec.size()) {
    const size_t to = std::min(spec.find(',', from), spec.size());
    const std::string part = spec.substr(from, to - from);
    from = to + 1;
    if (part == "...") {
      entries.emplace_back(ellipsis);
    } else if (part == "n") {
      entries.emplace_back(newAxis);
    } else if (part.find(':') == std::string::npos && part[0] != 't') {
      entries.emplace_back(int64_t(std::stoll(part)));
    } else if (part[0] == 't') {
      Shape shape;
      for (const auto& d : numbers(part.substr(1), '.')) shape.push_back(*d);
      const int64_t count = numElements(shape);
      entries.emplace_back(reshape(slice(flat, {used}, {used + count}), shape));
      used += count;
    } else {
      const auto p = numbers(part, ':');
      entries.emplace_back(Slice{p[0], p.size() > 1 ? p[1] : std::nullopt, p.size() > 2 ? p[2].value_or(1) : 1});
    }
  }
  return entries;
}

TEST(ComposedTorchTest, ReductionsTakeAndClampMatchPyTorch) {
  if (std::string why = testing::torchMissing(); !why.empty()) GTEST_FAIL() << why;
  struct Case {
    std::string name, kind, arg;  // as torch_composed.py reads them
    Shape x;
    std::function<Tensor(const Tensor&, const Tensor&)> f;  // x, indices
    Array indices = Array();
  };
  auto ids = [](Shape shape, std::vector<int32_t> values) { return Array::of<int32_t>(shape, values); };
  // Indices below `bound` in a repeating scramble (i * 7 + i / 3 mod bound).
  auto cyclic = [](Shape shape, int32_t bound) {
    std::vector<int32_t> values(numElements(shape));
    for (size_t i = 0; i < values.size(); ++i) values[i] = int32_t((i * 7 + i / 3) % bound);
    return Array::of<int32_t>(shape, values);
  };
  // Indices of [A, n, B] along the middle axis without repeats in a row: (2j + a + b) mod bound,
  // bound odd and above 2n.
  auto distinct = [](Shape shape, int32_t bound) {
    std::vector<int32_t> values(numElements(shape));
    for (size_t k = 0; k < values.size(); ++k) {
      const int64_t b = int64_t(k) % shape[2], j = int64_t(k) / shape[2] % shape[1], a = int64_t(k) / (shape[1] * shape[2]);
      values[k] = int32_t((2 * j + a + b) % bound);
    }
    return Array::of<int32_t>(shape, values);
  };
  // x[index], or x with twice x[index] written or added there, for an index spec (indexOf).
  auto indexed = [&](std::string name, std::string kind, std::string spec, Shape x, std::vector<int32_t> flat) {
    std::function<Tensor(const Tensor&, const Tensor&)> f = [kind, spec](const Tensor& t, const Tensor& i) {
      if (kind == "index_at") return indexGet(t, indexOf(spec, i));
      return indexPut(t, indexOf(spec, i), mul(indexGet(t, indexOf(spec, i)), 2.0), kind == "index_at_add");
    };
    if (flat.empty()) flat = {0};  // an index of slices alone: a placeholder the spec does not read
    return Case{name, kind, spec, x, f, ids({int64_t(flat.size())}, flat)};
  };
  // einsum of operands cut from a flat x: ARG is the equation ("=" for "->") and their shapes.
  auto einsumCase = [&](std::string name, std::string equation, std::vector<Shape> shapes) {
    std::string arg = equation;
    int64_t total = 0;
    for (const Shape& shape : shapes) {
      arg += "/";
      for (size_t d = 0; d < shape.size(); ++d) arg += (d ? "." : "") + std::to_string(shape[d]);
      total += numElements(shape);
    }
    if (const size_t arrow = arg.find("->"); arrow != std::string::npos) arg.replace(arrow, 2, "=");
    std::function<Tensor(const Tensor&, const Tensor&)> f = [equation, shapes](const Tensor& t, const Tensor&) {
      std::vector<Tensor> operands;
      int64_t used = 0;
      for (const Shape& shape : shapes) {
        operands.push_back(reshape(slice(t, {used}, {used + numElements(shape)}), shape));
        used += numElements(shape);
      }
      return einsum(equation, operands);
    };
    return Case{name, "einsum", arg, {total}, f};
  };
  const std::vector<Case> cases = {
      {"min_axis1", "min", "1", {3, 5, 4}, [](const Tensor& x, const Tensor&) { return min(x, {1}); }},
      {"min_all", "min", "0,1,2", {3, 5, 4}, [](const Tensor& x, const Tensor&) { return min(x, {0, 1, 2}); }},
      {"logsumexp_02", "logsumexp", "0,2", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return logsumexp(x, {0, 2}); }},
      // Around 1000: e^x overflows f64 unless the largest element is taken out first.
      {"logsumexp_large", "logsumexp", "-1", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return logsumexp(x, {-1}); }},
      {"take_axis1", "take", "1", {3, 5, 4}, [](const Tensor& x, const Tensor& i) { return take(x, i, 1); },
       ids({2, 3}, {4, 0, 4, 2, 1, 4})},
      {"take_axis_last", "take", "-1", {3, 5, 4}, [](const Tensor& x, const Tensor& i) { return take(x, i, -1); },
       ids({5}, {3, 3, 0, 1, 2})},
      {"take_axis0", "take", "0", {3, 5, 4}, [](const Tensor& x, const Tensor& i) { return take(x, i, 0); },
       ids({2}, {2, 2})},
      {"var_unbiased", "var", "0,2/1", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return variance(x, {0, 2}); }},
      {"var_biased_last", "var", "2/0", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return variance(x, {-1}, 0); }},
      {"std_all", "std", "0,1,2/1", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return stddev(x, {0, 1, 2}); }},
      {"smoothed_cross_entropy", "smoothed", "0.1", {6, 5},
       [](const Tensor& x, const Tensor& i) { return softmaxCrossEntropy(x, i, 0.1); },
       ids({6}, {0, 4, 2, 2, 1, 3})},
      {"upsample_2x3", "upsample", "2,3", {2, 3, 4, 5},
       [](const Tensor& x, const Tensor&) { return upsampleNearest2d(x, 2, 3); }},
      // take_along_axis (an op of its own, not composed) against torch.gather, with repeats.
      {"gather_axis1", "gather", "1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return takeAlongAxis(x, i, 1); }, cyclic({3, 2, 4}, 5)},
      {"gather_axis_last", "gather", "-1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return takeAlongAxis(x, i, -1); }, cyclic({3, 5, 6}, 4)},
      {"scatter_axis1", "scatter", "1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return scatterAdd(x, i, mul(takeAlongAxis(x, i, 1), 2.0), 1); },
       cyclic({3, 7, 4}, 5)},
      // scatter against torch.scatter on indices without repeats (torch leaves repeats unspecified,
      // and gives every repeated update the gradient); the last one written: ScatterTest.
      {"scatter_set_axis1", "scatter_set", "1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return scatter(x, i, mul(takeAlongAxis(x, i, 1), 2.0), 1); },
       distinct({3, 3, 4}, 5)},
      // Max with every update equal to x's element it lands on (repeats too): the gradient shared
      // among ties, x's own element included; min with updates that win where x is negative.
      {"scatter_amax_ties", "scatter_amax", "1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return scatterMax(x, i, takeAlongAxis(x, i, 1), 1); },
       cyclic({3, 7, 4}, 5)},
      // take's inverses against torch.index_add (repeats) and torch.index_copy (none), axes 1 and 0.
      {"index_add_axis1", "index_add", "1", {3, 5, 4},
       [](const Tensor& x, const Tensor& i) { return indexAdd(x, i, mul(take(x, i, 1), 2.0), 1); },
       ids({7}, {4, 0, 4, 2, 1, 0, 4})},
      {"index_copy_axis0", "index_copy", "0", {5, 3, 2},
       [](const Tensor& x, const Tensor& i) { return indexCopy(x, i, mul(take(x, i, 0), 2.0)); }, ids({3}, {4, 1, 2})},
      // Advanced indexing over the leading axes by k index tensors (the rows of the indices):
      // x[i, j] with repeats, x.index_put of twice x[i, j] added (repeats) or written (none),
      // and every axis indexed.
      {"index_get", "index_get", "2", {4, 5, 3},
       [](const Tensor& x, const Tensor& i) { return indexGet(x, rowsOf(i)); },
       ids({2, 2, 3}, {3, 0, 3, 1, 2, 3, 4, 2, 4, 0, 1, 4})},
      {"index_put_add", "index_put", "2,1", {4, 5, 3},
       [](const Tensor& x, const Tensor& i) { return indexPut(x, rowsOf(i), mul(indexGet(x, rowsOf(i)), 2.0), true); },
       ids({2, 7}, {3, 0, 3, 1, 2, 3, 0, 4, 2, 4, 0, 1, 4, 2})},
      {"index_put_set", "index_put", "2,0", {4, 5, 3},
       [](const Tensor& x, const Tensor& i) { return indexPut(x, rowsOf(i), mul(indexGet(x, rowsOf(i)), 2.0)); },
       ids({2, 2, 3}, {3, 0, 3, 1, 2, 1, 4, 2, 0, 0, 1, 3})},
      {"index_put_every_axis", "index_put", "3,1", {4, 5, 3},
       [](const Tensor& x, const Tensor& i) { return indexPut(x, rowsOf(i), mul(indexGet(x, rowsOf(i)), 2.0), true); },
       ids({3, 5}, {3, 0, 3, 1, 2, 4, 2, 4, 0, 1, 2, 0, 2, 1, 0})},
      // Indices with slices and an ellipsis (NumPy's rules: B in place when the tensors are
      // adjacent, first when a slice lies between them); written, no position repeats.
      indexed("index_at_middle", "index_at", ":,t2.3", {4, 5, 6}, {4, 0, 4, 2, 1, 3}),
      indexed("index_at_ellipsis", "index_at", "...,t4", {4, 5, 6}, {5, 0, 5, 2}),
      indexed("index_at_apart", "index_at", "t2.1,:,t3", {4, 5, 6}, {3, 0, 5, 1, 5}),
      indexed("index_at_strided", "index_at", "1:4:2,t3,-4:", {4, 5, 6}, {4, 4, 0}),
      indexed("index_at_slices", "index_at", "1:4:2,:,-5::2", {4, 5, 6}, {}),
      indexed("index_at_add", "index_at_add", "1:,t2.2", {4, 5, 6}, {4, 0, 4, 4}),
      indexed("index_at_set_apart", "index_at_set", "t2.1,:,t3", {4, 5, 6}, {2, 0, 1, 4, 5}),
      indexed("index_at_add_ellipsis", "index_at_add", "...,1:5:3,t4", {4, 5, 6}, {5, 1, 5, 0}),
      // Integers: among tensors one of them (NumPy's rule: B first when a slice lies between;
      // torch would select first, and its reference is given a tensor of shape [1]), alone a
      // selection; new axes.
      indexed("index_at_int_adjacent", "index_at", "t2.2,-1", {4, 5, 6}, {3, 0, 3, 1}),
      indexed("index_at_int_apart", "index_at", ":,0,:,t3", {2, 3, 4, 5}, {4, 0, 2}),
      indexed("index_at_new_axis", "index_at", ":,n,t3", {4, 5, 6}, {4, 0, 4}),
      indexed("index_at_select", "index_at", "-2,n,...,1:3", {4, 5, 6}, {}),
      indexed("index_at_add_int", "index_at_add", "-1,t3", {4, 5, 6}, {4, 0, 4}),
      indexed("index_at_set_int", "index_at_set", "n,...,1,t2", {4, 5, 6}, {5, 0}),
      // einsum: batched matmul, attention's scores, a transpose, a trace and a diagonal, a dot,
      // implicit outputs (ASCII order), broadcast ellipses and a size-1 label, an outer product,
      // three operands, a label summed within its operand.
      einsumCase("einsum_bmm", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}),
      einsumCase("einsum_attention", "bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}),
      einsumCase("einsum_transpose", "ijk->kij", {{2, 3, 4}}),
      einsumCase("einsum_trace", "ii", {{4, 4}}),
      einsumCase("einsum_diagonal", "iji->ji", {{3, 2, 3}}),
      einsumCase("einsum_dot", "i,i->", {{5}, {5}}),
      einsumCase("einsum_implicit", "Bj,jA", {{2, 3}, {3, 4}}),
      einsumCase("einsum_ellipsis", "...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}),
      einsumCase("einsum_broadcast_label", "ij,ij->ij", {{1, 3}, {2, 3}}),
      einsumCase("einsum_outer", "i,j->ij", {{3}, {4}}),
      einsumCase("einsum_chain", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}),
      einsumCase("einsum_summed_own", "ijk,jl->il", {{2, 3, 4}, {3, 5}}),
      // Segments 3 and 5 empty in the sum (zeros); every segment named in the max.
      {"segment_sum", "segment_sum", "6", {7, 3, 2},
       [](const Tensor& x, const Tensor& i) { return segmentSum(x, i, 6); }, ids({7}, {4, 0, 4, 2, 1, 0, 4})},
      {"segment_max", "segment_max", "4", {7, 3, 2},
       [](const Tensor& x, const Tensor& i) { return segmentMax(x, i, 4); }, ids({7}, {3, 0, 3, 2, 1, 0, 3})},
      {"scatter_amin_last", "scatter_amin", "-1", {3, 4, 6},
       [](const Tensor& x, const Tensor& i) { return scatterMin(x, i, mul(takeAlongAxis(x, i, -1), 1.5), -1); },
       cyclic({3, 4, 9}, 6)},
      {"clamp", "clamp", "-0.4,0.3", {3, 5, 4},
       [](const Tensor& x, const Tensor&) { return clamp(x, -0.4, 0.3); }},
      // 37 along the axis: six shifted adds, the last a partial one.
      {"cumsum_axis1", "cumsum", "1", {3, 37, 4}, [](const Tensor& x, const Tensor&) { return cumsum(x, 1); }},
      {"cumsum_last", "cumsum", "-1", {2, 3, 8}, [](const Tensor& x, const Tensor&) { return cumsum(x, -1); }},
      {"cumsum_one", "cumsum", "0", {1, 5}, [](const Tensor& x, const Tensor&) { return cumsum(x, 0); }},
      {"sort_axis1", "sort", "1,0", {3, 37, 4}, [](const Tensor& x, const Tensor&) { return sort(x, 1); }},
      {"sort_descending", "sort", "-1,1", {4, 9}, [](const Tensor& x, const Tensor&) { return sort(x, -1, true); }},
      {"topk", "topk", "3", {5, 8}, [](const Tensor& x, const Tensor&) { return topK(x, 3).values; }},
      // Ties (x * 4 truncated to integers): the stable order against torch.argsort(stable=True).
      {"argsort_ties", "argsort_ties", "1", {3, 40, 2},
       [](const Tensor& x, const Tensor&) {
         const Tensor tied = cast(cast(mul(x, 4.0), DType::i32), DType::f64);
         return add(cast(argsort(tied, 1), DType::f64), mul(x, 0.0));
       }},
      {"topk_indices", "topk_indices", "4", {3, 10},
       [](const Tensor& x, const Tensor&) {
         const Tensor tied = cast(cast(mul(x, 4.0), DType::i32), DType::f64);
         return add(cast(topK(tied, 4).indices, DType::f64), mul(slice(x, {0, 0}, {3, 4}), 0.0));
       }}};
  testing::Exchange exchange;
  std::map<std::string, std::pair<Array, Array>> ours;  // y, dx
  std::string specs;
  uint64_t seed = 300;
  for (const Case& c : cases) {
    Array x = randomArray(DType::f64, c.x, seed++);
    Tensor indices = c.indices.storage ? Tensor(c.indices) : Tensor(ids({1}, {0}));
    const auto& f = c.f;
    if (c.name == "logsumexp_large")
      for (int64_t k = 0; k < x.numel(); ++k) x.values<double>()[k] = 300 * x.values<double>()[k] + 1000;
    Array y = jit([&](const Tensor& t, const Tensor& i) { return f(t, i); })(x, indices).array();
    const Array g = randomArray(DType::f64, y.shape, seed++);
    auto step = jit([&](const Tensor& t, const Tensor& i, const Tensor& cotangent) {
      return value_and_grad([&](const Tensor& u) {
        Tensor weighted = f(u, i) * cotangent;
        return sum(weighted, testing::allAxes(weighted));
      })(t);
    });
    auto [total, dx] = step(x, indices, g);
    ours[c.name] = {y, dx.array()};
    exchange.write("x." + c.name, x);
    exchange.write("g." + c.name, g);
    if (c.indices.storage) exchange.write("i." + c.name, c.indices);
    specs += " " + c.name + " " + c.kind + " " + c.arg;
  }
  exchange.close();
  std::string command = testing::python() + " " SPMD_SOURCE_DIR "/tests/reference/torch_composed.py " + exchange.dir() + specs;
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;
  for (const auto& [name, result] : ours) {
    const auto& [y, dx] = result;
    EXPECT_LT(maxRelativeError(y, exchange.read("y." + name, y.shape, DType::f64)), 1e-13) << name << " y";
    EXPECT_LT(maxRelativeError(dx, exchange.read("dx." + name, dx.shape, DType::f64)), 1e-13) << name << " dx";
    EXPECT_TRUE(std::isfinite(testing::valueAt(y, 0))) << name;
  }
  EXPECT_EQ(ours["take_axis1"].first.shape, (Shape{3, 2, 3, 4}));
  EXPECT_EQ(ours["gather_axis_last"].first.shape, (Shape{3, 5, 6}));
  EXPECT_EQ(ours["logsumexp_02"].first.shape, (Shape{5}));
  // NumPy's placement of the index tensors' shape B: in place, or first when a slice lies between.
  EXPECT_EQ(ours["index_at_middle"].first.shape, (Shape{4, 2, 3, 6}));
  EXPECT_EQ(ours["index_at_apart"].first.shape, (Shape{2, 3, 5}));
  EXPECT_EQ(ours["index_at_strided"].first.shape, (Shape{2, 3, 4}));
  EXPECT_EQ(ours["index_at_slices"].first.shape, (Shape{2, 5, 3}));
  EXPECT_EQ(ours["index_at_int_adjacent"].first.shape, (Shape{2, 2, 6}));
  EXPECT_EQ(ours["einsum_implicit"].first.shape, (Shape{4, 2}));  // "AB": upper case first, as torch and numpy
  EXPECT_EQ(ours["einsum_ellipsis"].first.shape, (Shape{2, 3, 3, 2}));
  EXPECT_EQ(ours["einsum_trace"].first.shape, (Shape{}));
  EXPECT_EQ(ours["index_at_int_apart"].first.shape, (Shape{3, 2, 4}));
  EXPECT_EQ(ours["index_at_new_axis"].first.shape, (Shape{4, 1, 3, 6}));
  EXPECT_EQ(ours["index_at_select"].first.shape, (Shape{1, 5, 2}));
}

// scatter where indices repeat, by hand on cpu and sim: the last update in index order is written,
// and the gradient reaches x's elements no update was written to and the written updates only.
TEST(ComposedTorchTest, ScatterWritesTheLastUpdateAndOnlyItGetsTheGradient) {
  const Array x = Array::of<float>({2, 4}, std::vector<float>{10, 11, 12, 13, 20, 21, 22, 23});
  const Array u = Array::of<float>({2, 3}, std::vector<float>{100, 101, 102, 200, 201, 202});
  const Array w = Array::of<float>({2, 4}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor at(Array::of<int32_t>({2, 3}, std::vector<int32_t>{1, 3, 1, 0, 0, 0}));
  auto expect = [](const Array& a, std::vector<float> values, const char* what) {
    ASSERT_EQ(a.numel(), int64_t(values.size())) << what;
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (std::isnan(values[size_t(i)])) EXPECT_TRUE(std::isnan(testing::valueAt(a, i))) << what << " element " << i;
      else EXPECT_EQ(testing::valueAt(a, i), values[size_t(i)]) << what << " element " << i;
    }
  };
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    auto loss = [&](const Tensor& a, const Tensor& b, const Tensor& weights) {
      Tensor y = scatter(a, at, b, 1) * weights;
      return sum(y, {0, 1});
    };
    auto values = jit([&](const Tensor& a, const Tensor& b) { return scatter(a, at, b, -1); }, {.devices = devices});
    expect(values(x, u).array(), {10, 102, 12, 101, 202, 21, 22, 23}, "result");
    auto dx = jit([&](const Tensor& a, const Tensor& b, const Tensor& weights) {
      return grad([&](const Tensor& t) { return loss(t, b, weights); })(a);
    }, {.devices = devices});
    expect(dx(x, u, w).array(), {1, 0, 3, 0, 0, 6, 7, 8}, "x's gradient");
    auto du = jit([&](const Tensor& a, const Tensor& b, const Tensor& weights) {
      return grad([&](const Tensor& t) { return loss(a, t, weights); })(b);
    }, {.devices = devices});
    expect(du(x, u, w).array(), {0, 4, 2, 0, 0, 5}, "the updates' gradient");
    // A NaN among the operands makes the element NaN, whichever comes first.
    const Array xNan = Array::of<float>({2, 4}, std::vector<float>{10, 11, NAN, 13, 20, 21, 22, 23});
    const Array uNan = Array::of<float>({2, 3}, std::vector<float>{100, 101, 102, 200, NAN, 202});
    auto extremes = jit(
        [&](const Tensor& a, const Tensor& b) { return std::tuple{scatterMax(a, at, b, 1), scatterMin(a, at, b, 1)}; },
        {.devices = devices});
    auto [high, low] = extremes(xNan, uNan);
    expect(high.array(), {10, 102, NAN, 101, NAN, 21, 22, 23}, "scatterMax");
    expect(low.array(), {10, 11, NAN, 13, NAN, 21, 22, 23}, "scatterMin");
    auto bad = jit([&](const Tensor& a, const Tensor& b) { return scatterMax(a, Tensor(Array::of<int32_t>({2, 3}, std::vector<int32_t>{0, 1, 2, 3, 4, 0})), b, 1); },
                   {.devices = devices});
    const std::string message = testing::errorOf([&] { bad(x, u).array(); });
    EXPECT_NE(message.find("ComposedTorchTest.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("index 4 at position 4 of the indices is out of range [0, 4)"), std::string::npos) << message;
  }
}

// Segment max and min of rows with an empty segment: the identity (-inf, +inf) there, as jax's;
// an id out of range and ids that do not match the rows: errors at the caller's line.
TEST(ComposedTorchTest, SegmentReductionsGiveEmptySegmentsTheIdentity) {
  const Array data = Array::of<float>({3, 2}, std::vector<float>{1, -2, 3, 4, -5, 6});
  const Tensor ids(Array::of<int32_t>({3}, std::vector<int32_t>{2, 0, 2}));
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    auto f = jit([&](const Tensor& x) { return std::tuple{segmentMax(x, ids, 4), segmentMin(x, ids, 4), segmentSum(x, ids, 4)}; },
                 {.devices = devices});
    auto [high, low, total] = f(data);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> highs = {3, 4, -inf, -inf, 1, 6, -inf, -inf}, lows = {3, 4, inf, inf, -5, -2, inf, inf};
    const std::vector<float> sums = {3, 4, 0, 0, -4, 4, 0, 0};
    for (int64_t k = 0; k < 8; ++k) {
      EXPECT_EQ(high.array().values<float>()[k], highs[size_t(k)]) << "segmentMax element " << k;
      EXPECT_EQ(low.array().values<float>()[k], lows[size_t(k)]) << "segmentMin element " << k;
      EXPECT_EQ(total.array().values<float>()[k], sums[size_t(k)]) << "segmentSum element " << k;
    }
  }
  const std::string range = testing::errorOf([&] {
    jit([](const Tensor& x) { return segmentMax(x, Tensor(Array::of<int32_t>({3}, std::vector<int32_t>{0, 4, 1})), 4); })(data)
        .array();
  });
  EXPECT_NE(range.find("ComposedTorchTest.cpp:"), std::string::npos) << range;
  EXPECT_NE(range.find("index 4 at position 1 of the indices is out of range [0, 4)"), std::string::npos) << range;
  // A sum's ids are checked by its fold alone (embedding_backward): the host loop on cpu, the
  // library's deferred device-side check on sim.
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    const Tensor bad(Array::of<int32_t>({3}, std::vector<int32_t>{0, 2, -3}));
    const std::string summed = testing::errorOf([&] {
      jit([&](const Tensor& x) { return segmentSum(x, bad, 4); }, {.devices = devices})(data).array();
    });
    EXPECT_NE(summed.find("ComposedTorchTest.cpp:"), std::string::npos) << summed;
    EXPECT_NE(summed.find("index -3 at position 2 of the indices is out of range [0, 4)"), std::string::npos) << summed;
    const std::string added = testing::errorOf([&] {
      jit([&](const Tensor& x) { return indexAdd(x, bad, x); }, {.devices = devices})(data).array();
    });
    EXPECT_NE(added.find("ComposedTorchTest.cpp:"), std::string::npos) << added;
    EXPECT_NE(added.find("index -3 at position 2 of the indices is out of range [0, 3)"), std::string::npos) << added;
  }
  const std::string copied = testing::errorOf([&] {
    jit([](const Tensor& x) {
      return indexCopy(x, Tensor(Array::of<int32_t>({2}, std::vector<int32_t>{1, -1})), slice(x, {0, 0}, {2, 2}));
    })(data).array();
  });
  EXPECT_NE(copied.find("ComposedTorchTest.cpp:"), std::string::npos) << copied;
  EXPECT_NE(copied.find("index -1 at position 1 of the indices is out of range [0, 3)"), std::string::npos) << copied;
  const std::string source = testing::errorOf([&] {
    jit([](const Tensor& x) { return indexAdd(x, Tensor(Array::of<int32_t>({2}, std::vector<int32_t>{1, 0})), x); })(data);
  });
  EXPECT_NE(source.find("spmd::indexAdd: source f32[3, 2] must be x f32[3, 2] with 2 (index's size) along axis 0, "
                        "i.e. [2, 2] of x's dtype"),
            std::string::npos)
      << source;
  const std::string rows = testing::errorOf([&] {
    jit([](const Tensor& x) { return segmentSum(x, Tensor(Array::of<int32_t>({2}, std::vector<int32_t>{0, 1})), 4); })(data);
  });
  EXPECT_NE(rows.find("ComposedTorchTest.cpp:"), std::string::npos) << rows;
  EXPECT_NE(rows.find("spmd::segmentSum: segmentIds must be i32 [3], an id for each row of data f32[3, 2], got i32[2]"),
            std::string::npos)
      << rows;
}

// oneHot against its definition on cpu and sim (a label per class and repeats, f32 and f64
// rows), arange's values, and a label out of range: a run-time error at the caller's line naming
// its position.
// Advanced indexing by hand on cpu and sim: broadcast index tensors give the explicitly
// broadcast ones' bits, a written position repeated takes the last value in index order (only it
// gets a gradient), an added one the sum; bad indices, shapes and counts are errors at the caller's line.
TEST(ComposedTorchTest, IndexPutBroadcastsItsIndicesAndTheLastWrittenValueWins) {
  const Array x = Array::of<float>({3, 4}, std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  const Tensor rows(Array::of<int32_t>({2, 1}, std::vector<int32_t>{2, 0}));
  const Tensor columns(Array::of<int32_t>({3}, std::vector<int32_t>{3, 1, 3}));
  const Tensor rowsWide(Array::of<int32_t>({2, 3}, std::vector<int32_t>{2, 2, 2, 0, 0, 0}));
  const Tensor columnsWide(Array::of<int32_t>({2, 3}, std::vector<int32_t>{3, 1, 3, 3, 1, 3}));
  const Array values = Array::of<float>({2, 3}, std::vector<float>{100, 101, 102, 200, 201, 202});
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    auto get = jit([&](const Tensor& a) { return std::tuple{indexGet(a, {rows, columns}), indexGet(a, {rowsWide, columnsWide})}; },
                   {.devices = devices});
    auto [picked, pickedWide] = get(x);
    testing::expectClose(picked.array(), Array::of<float>({2, 3}, std::vector<float>{23, 21, 23, 3, 1, 3}), 0, 0, "x[i, j]");
    testing::expectClose(pickedWide.array(), picked.array(), 0, 0, "x[i, j] broadcast by hand");
    auto put = jit([&](const Tensor& a, const Tensor& v) {
      return std::tuple{indexPut(a, {rows, columns}, v), indexPut(a, {rows, columns}, v, true),
                        indexPut(a, {rowsWide, columnsWide}, v, true), indexPut(a, {rows}, fill(slice(a, {0, 0}, {1, 4}), 7.0))};
    }, {.devices = devices});
    auto [written, added, addedWide, wholeRows] = put(x, values);
    auto sliced = jit([&](const Tensor& a) {
      return std::tuple{indexGet(a, {Slice{}, columns}), indexGet(a, {Slice{1}, Slice{std::nullopt, -1}}),
                        indexPut(a, {ellipsis, columns}, Tensor(Array::of<float>({3}, std::vector<float>{-1, -2, -3})))};
    }, {.devices = devices});
    auto [columnsPicked, corner, columnsWritten] = sliced(x);
    // Python's clamping at the ends of int64: x[::2^63 - 1, -2^63:2^63 - 1] is x's first row.
    constexpr int64_t most = std::numeric_limits<int64_t>::max(), least = std::numeric_limits<int64_t>::min();
    auto extremes = jit([&](const Tensor& a) { return indexGet(a, {Slice(std::nullopt, std::nullopt, most), Slice(least, most)}); },
                        {.devices = devices});
    testing::expectClose(extremes(x).array(), Array::of<float>({1, 4}, std::vector<float>{0, 1, 2, 3}), 0, 0,
                         "x[::2^63 - 1, -2^63:2^63 - 1]");
    testing::expectClose(columnsPicked.array(), Array::of<float>({3, 3}, std::vector<float>{3, 1, 3, 13, 11, 13, 23, 21, 23}),
                         0, 0, "x[:, j]");
    testing::expectClose(corner.array(), Array::of<float>({2, 3}, std::vector<float>{10, 11, 12, 20, 21, 22}), 0, 0,
                         "x[1:, :-1]");
    testing::expectClose(columnsWritten.array(),
                         Array::of<float>({3, 4}, std::vector<float>{0, -2, 2, -3, 10, -2, 12, -3, 20, -2, 22, -3}), 0, 0,
                         "x.at[..., j].set(v): the last of column 3's two writes wins");
    testing::expectClose(written.array(),
                Array::of<float>({3, 4}, std::vector<float>{0, 201, 2, 202, 10, 11, 12, 13, 20, 101, 22, 102}), 0, 0, "set");
    testing::expectClose(added.array(),
                Array::of<float>({3, 4}, std::vector<float>{0, 202, 2, 405, 10, 11, 12, 13, 20, 122, 22, 225}), 0, 0, "add");
    testing::expectClose(addedWide.array(), added.array(), 0, 0, "add broadcast by hand");
    testing::expectClose(wholeRows.array(),
                Array::of<float>({3, 4}, std::vector<float>{7, 7, 7, 7, 10, 11, 12, 13, 7, 7, 7, 7}), 0, 0, "whole rows");
    auto dv = jit([&](const Tensor& a, const Tensor& v) {
      return grad([&](const Tensor& t) { return sum(mul(indexPut(a, {rows, columns}, t), a), {0, 1}); })(v);
    }, {.devices = devices});
    testing::expectClose(dv(x, values).array(), Array::of<float>({2, 3}, std::vector<float>{0, 21, 23, 0, 1, 3}), 0, 0,
                "only the last written value of a position gets its gradient");
    auto bad = jit([&](const Tensor& a) {
      return indexGet(a, {rows, Tensor(Array::of<int32_t>({3}, std::vector<int32_t>{1, 4, 0}))});
    }, {.devices = devices});
    const std::string range = testing::errorOf([&] { bad(x).array(); });
    EXPECT_NE(range.find("ComposedTorchTest.cpp:"), std::string::npos) << range;
    EXPECT_NE(range.find("index 4 at position 1 of the indices is out of range [0, 4)"), std::string::npos) << range;
    auto badColumn = jit([&](const Tensor& a) {
      return indexGet(a, {Slice{}, Tensor(Array::of<int32_t>({3}, std::vector<int32_t>{1, 0, 4}))});
    }, {.devices = devices});
    const std::string column = testing::errorOf([&] { badColumn(x).array(); });
    EXPECT_NE(column.find("ComposedTorchTest.cpp:"), std::string::npos) << column;
    EXPECT_NE(column.find("index 4 at position 2 of the indices is out of range [0, 4)"), std::string::npos) << column;
  }
  auto expectError = [&](const std::function<Tensor(const Tensor&)>& f, const std::string& expected) {
    const std::string message = testing::errorOf([&] { jit(f)(x); });
    EXPECT_NE(message.find("ComposedTorchTest.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  expectError([&](const Tensor& a) { return indexGet(a, {rows, Tensor(Array::of<int32_t>({3, 1}, std::vector<int32_t>{0, 1, 2}))}); },
              "spmd::indexGet: indices[1] i32[3, 1] does not broadcast with the indices before it (together [2, 1])");
  expectError([&](const Tensor& a) { return indexGet(a, {rows, columns, columns}); },
              "spmd::indexGet: give from 1 to 2 index tensors, integers or slices, one for each of x f32[3, 4]'s leading axes");
  expectError([&](const Tensor& a) { return indexGet(a, {rows, cast(columns, DType::f32)}); },
              "spmd::indexGet: indices[1] f32[3] must be i32");
  expectError([&](const Tensor& a) { return indexPut(a, {rows, columns}, slice(a, {0, 0}, {3, 3})); },
              "spmd::indexPut: values f32[3, 3] must broadcast to [2, 3], the shape x f32[3, 4][index] has, in x's dtype");
  expectError([&](const Tensor& a) { return indexGet(a, {Slice{1, 3, 0}, columns}); },
              "spmd::indexGet: index[0] has step 0; steps must be 1 or more");
  expectError([&](const Tensor& a) { return indexPut(a, {Slice{-1, 1}, columns}, a); },
              "spmd::indexPut: index[0] selects nothing of an axis of 3 (x f32[3, 4]): start 2, stop 1");
  expectError([&](const Tensor& a) { return indexGet(a, {Slice(), -5}); },
              "spmd::indexGet: index[1] = -5 is outside axis 1 of x f32[3, 4] (size 4; negative integers count from the end)");
  expectError([&](const Tensor& a) { return indexGet(a, {ellipsis, rows, ellipsis}); },
              "spmd::indexGet: the index holds 2 ellipses; give at most one");
  expectError([&](const Tensor& a) { return indexGet(a, {ellipsis}); },
              "spmd::indexGet: give from 1 to 2 index tensors, integers or slices");
}

// i32 values (labels, ids) move through take, indexGet and indexPut's writes exactly, by way of
// f64; a sum of i32 values is refused at the caller's line.
TEST(ComposedTorchTest, IndexingMovesI32ValuesExactly) {
  const Array labels = Array::of<int32_t>({2, 3}, std::vector<int32_t>{2147483647, -7, 5, -2147483647 - 1, 0, 9});
  const Tensor perm(Array::of<int32_t>({3}, std::vector<int32_t>{2, 0, 2}));
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    auto f = jit([&](const Tensor& l) {
      return std::tuple{indexGet(l, {Slice(), perm}), take(l, perm, 1),
                        indexPut(l, {1, perm}, Tensor(Array::of<int32_t>({3}, std::vector<int32_t>{-1, -2, -3})))};
    }, {.devices = devices});
    auto [picked, taken, written] = f(labels);
    const std::vector<int32_t> want = {5, 2147483647, 5, 9, -2147483647 - 1, 9};
    ASSERT_EQ(picked.array().dtype, DType::i32);
    ASSERT_EQ(taken.array().dtype, DType::i32);
    ASSERT_EQ(written.array().dtype, DType::i32);
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(picked.array().values<int32_t>()[k], want[k]) << "x[:, perm] element " << k;
      EXPECT_EQ(taken.array().values<int32_t>()[k], want[k]) << "take element " << k;
    }
    const std::vector<int32_t> put = {2147483647, -7, 5, -2, 0, -3};  // column 2 written twice: the last wins
    for (size_t k = 0; k < put.size(); ++k) EXPECT_EQ(written.array().values<int32_t>()[k], put[k]) << "set element " << k;
  }
  const std::string message = testing::errorOf([&] {
    jit([&](const Tensor& l) { return indexPut(l, {perm}, l, true); })(labels);
  });
  EXPECT_NE(message.find("ComposedTorchTest.cpp:"), std::string::npos) << message;
  EXPECT_NE(message.find("spmd::indexPut: adding i32 values is not supported"), std::string::npos) << message;
}

// einsum's errors name the equation and what is wrong, at the caller's line.
TEST(ComposedTorchTest, EinsumErrorsNameTheEquation) {
  const Array a = randomArray(DType::f32, {2, 3}, 1), b = randomArray(DType::f32, {3, 4}, 2);
  auto expectError = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& f, const std::string& expected) {
    const std::string message = testing::errorOf([&] { jit(f)(a, b); });
    EXPECT_NE(message.find("ComposedTorchTest.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  expectError([](const Tensor& x, const Tensor&) { return einsum("ij,jk->ik", {x}); },
              "spmd::einsum(\"ij,jk->ik\"): the equation names 2 operands before '->', 1 are given");
  // Equations of the two operands a [2, 3] and b [3, 4], and what each error says.
  const std::vector<std::pair<std::string, std::string>> equations = {
      {"i1,1k", "operand 0's term 'i1' holds '1'; labels are letters a-z and A-Z"},
      {"ijk,jk->i", "operand 0 f32[2, 3] has 2 axes, its term 'ijk' names 3"},
      {"ij,ik->jk", "label 'i' is 2 long in one place and 3 in operand 1 f32[3, 4]"},
      {"...j,jk->k", "the operands' ... stands for 1 axes the output leaves out; put ... in the output"},
      {"ij,jk->iz", "the output's label 'z' names no operand's axis"},
      {"ij,jk->ii", "the output names label 'i' twice"}};
  for (const auto& [equation, expected] : equations)
    expectError([&](const Tensor& x, const Tensor& y) { return einsum(equation, {x, y}); }, expected);
  expectError([](const Tensor& x, const Tensor& y) { return einsum("ij,jk->ik", {x, cast(y, DType::f64)}); },
              "operand 1 is f64[3, 4]; the operands must share one float dtype");
}

TEST(ComposedTorchTest, OneHotAndArange) {
  const std::vector<int32_t> labels = {0, 4, 2, 2, 1, 3, 4, 0};
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    for (DType dtype : {DType::f32, DType::f64}) {
      auto f = jit([dtype](const Tensor& l) { return oneHot(l, 5, dtype); }, {.devices = devices});
      Array rows = f(Array::of<int32_t>({2, 4}, labels)).array();
      ASSERT_EQ(rows.shape, (Shape{2, 4, 5}));
      ASSERT_EQ(rows.dtype, dtype);
      for (int64_t i = 0; i < rows.numel(); ++i)
        EXPECT_EQ(testing::valueAt(rows, i), labels[size_t(i / 5)] == i % 5 ? 1.0 : 0.0) << "element " << i;
    }
    auto bad = jit([](const Tensor& l) { return oneHot(l, 5); }, {.devices = devices});
    const std::string message =
        testing::errorOf([&] { bad(Array::of<int32_t>({3}, std::vector<int32_t>{1, 5, 0})).array(); });
    EXPECT_NE(message.find("ComposedTorchTest.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("index 5 at position 1 of the indices is out of range [0, 5)"), std::string::npos)
        << message;
  }
  Array a = arange(6, DType::f64).array();
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(testing::valueAt(a, i), double(i));
  EXPECT_EQ(arange(0).shape(), (Shape{0}));
  EXPECT_NE(testing::errorOf([] { arange(-1); }).find("n must be from 0"), std::string::npos);
  EXPECT_NE(testing::errorOf([] { jit([](const Tensor& l) { return oneHot(l, 0); })(arange(3)); })
                .find("classes must be from 1"),
            std::string::npos);
  EXPECT_NE(testing::errorOf([] { jit([](const Tensor& x) { return cumsum(x, 2); })(arange(3, DType::f32)); })
                .find("axis 2 is outside"),
            std::string::npos);
}

// A slice of all -inf gives -inf (its gradient NaN, as torch's), one holding +inf gives inf, and
// the others their finite values beside them.
TEST(ComposedTorchTest, LogsumexpOfInfiniteSlices) {
  const double inf = std::numeric_limits<double>::infinity();
  Array x = Array::of<double>({3, 2}, std::vector<double>{-inf, -inf, 1.0, inf, 2.0, 2.0});
  Array y = jit([](const Tensor& t) { return logsumexp(t, {1}); })(x).array();
  EXPECT_EQ(y.values<double>()[0], -inf);
  EXPECT_EQ(y.values<double>()[1], inf);
  EXPECT_DOUBLE_EQ(y.values<double>()[2], 2.0 + std::log(2.0));
}

// argmin: the first smallest element's index, a NaN first; against the host's loop.
TEST(ComposedTorchTest, ArgminIsTheFirstSmallest) {
  Array x = randomArray(DType::f32, {4, 7}, 5);
  x.values<float>()[9] = x.values<float>()[12] = -3;  // a tie in row 1: index 2 wins
  x.values<float>()[25] = NAN;                        // row 3: the NaN at 4
  Array found = jit([](const Tensor& t) { return argmin(t, 1); })(x).array();
  ASSERT_EQ(found.dtype, DType::i32);
  for (int64_t r = 0; r < 4; ++r) {
    int32_t best = 0;
    for (int32_t c = 1; c < 7; ++c) {
      const float v = x.values<float>()[r * 7 + c], b = x.values<float>()[r * 7 + best];
      if (!std::isnan(b) && (std::isnan(v) || v < b)) best = c;
    }
    EXPECT_EQ(found.values<int32_t>()[r], best) << "row " << r;
  }
  EXPECT_EQ(found.values<int32_t>()[1], 2);
  EXPECT_EQ(found.values<int32_t>()[3], 4);
}

TEST(ComposedTorchTest, ActivationLayersAreTheirFunctionsAndBadArgumentsNameTheLine) {
  const Array x = randomArray(DType::f32, {2, 3, 4, 6}, 11, -4, 4);
  nn::Sequential net("net");
  net.add<nn::GELU>(), net.add<nn::SiLU>(), net.add<nn::Tanh>(), net.add<nn::Softplus>(), net.add<nn::Mish>();
  net.add<nn::LeakyReLU>(0.2), net.add<nn::ELU>(0.5), net.add<nn::Upsample>(2);
  auto [params, state] = net.initialize(1);
  EXPECT_EQ(params.size(), 0u);
  Array byLayers = jit([&](const Tensor& t) { return net.apply(params, state, t, true).first; })(x).array();
  Array byFunctions = jit([](const Tensor& t) {
                        return upsampleNearest2d(elu(leakyRelu(mish(softplus(tanh(silu(gelu(t))))), 0.2), 0.5), 2, 2);
                      })(x).array();
  testing::expectSameBits(byLayers, byFunctions, "activation layers");

  auto refused = [](std::function<Tensor(const Tensor&)> f) {
    return testing::errorOf([&] { jit([&](const Tensor& t) { return f(t); })(randomArray(DType::f32, {2, 3}, 1)); });
  };
  const std::string axis = refused([](const Tensor& t) {
    return take(t, Tensor(Array::of<int32_t>({1}, std::vector<int32_t>{0})), 2);
  });
  EXPECT_NE(axis.find("ComposedTorchTest.cpp"), std::string::npos) << axis;
  EXPECT_NE(axis.find("spmd::take: axis 2 is outside f32[2, 3] (rank 2"), std::string::npos) << axis;
  const std::string dtype = refused([](const Tensor& t) { return take(t, t, 0); });
  EXPECT_NE(dtype.find("spmd::take: indices must be i32, got f32[2, 3]"), std::string::npos) << dtype;
  const std::string scatterShape = refused([](const Tensor& t) {
    return scatterAdd(t, Tensor(Array::of<int32_t>({2, 2}, std::vector<int32_t>{0, 1, 2, 0})), t, 1);
  });
  EXPECT_NE(scatterShape.find("ComposedTorchTest.cpp"), std::string::npos) << scatterShape;
  EXPECT_NE(scatterShape.find("spmd::scatterAdd: indices i32[2, 2] and updates f32[2, 3] must have one shape, of x "
                              "f32[2, 3]'s rank and its sizes on every axis but 1"),
            std::string::npos)
      << scatterShape;
  const std::string maxShape = refused([](const Tensor& t) {
    return scatterMax(t, Tensor(Array::of<int32_t>({1, 3}, std::vector<int32_t>{0, 1, 2})), t, 0);
  });
  EXPECT_NE(maxShape.find("ComposedTorchTest.cpp"), std::string::npos) << maxShape;
  EXPECT_NE(maxShape.find("spmd::scatterMax: indices i32[1, 3] and updates f32[2, 3] must have one shape"),
            std::string::npos)
      << maxShape;
  const std::string gatherShape = refused([](const Tensor& t) {
    return takeAlongAxis(t, Tensor(Array::of<int32_t>({3, 1}, std::vector<int32_t>{0, 1, 2})), 1);
  });
  EXPECT_NE(gatherShape.find("ComposedTorchTest.cpp"), std::string::npos) << gatherShape;
  EXPECT_NE(gatherShape.find("differ on axis 0, which is not the axis taken along (1)"), std::string::npos)
      << gatherShape;
  const std::string bounds = refused([](const Tensor& t) { return clamp(t, 1.0, -1.0); });
  EXPECT_NE(bounds.find("spmd::clamp: the bounds must be numbers with low <= high"), std::string::npos) << bounds;
  const std::string correction = refused([](const Tensor& t) { return variance(t, {0}, 2); });
  EXPECT_NE(correction.find("spmd::variance: each slice of f32[2, 3] holds 2 elements, which leaves nothing to divide by with correction 2"),
            std::string::npos)
      << correction;
  const std::string smoothing = refused([](const Tensor& t) {
    return softmaxCrossEntropy(t, Tensor(Array::of<int32_t>({2}, std::vector<int32_t>{0, 1})), 1.5);
  });
  EXPECT_NE(smoothing.find("spmd::softmaxCrossEntropy: labelSmoothing must be in [0, 1], got 1.5"), std::string::npos)
      << smoothing;
  const std::string upsample = refused([](const Tensor& t) { return upsampleNearest2d(t, 2, 2); });
  EXPECT_NE(upsample.find("spmd::upsampleNearest2d: x must be [N, C, H, W] and the factors positive, got f32[2, 3] and 2 x 2"),
            std::string::npos)
      << upsample;
  const std::string slope = refused([](const Tensor& t) { return leakyRelu(t, NAN); });
  EXPECT_NE(slope.find("spmd::leakyRelu: the slope must be a finite number"), std::string::npos) << slope;
  // An index past the axis is a run-time error with its position, as embedding's.
  const std::string range = refused([](const Tensor& t) {
    return take(t, Tensor(Array::of<int32_t>({2}, std::vector<int32_t>{1, 3})), 1);
  });
  EXPECT_NE(range.find("3"), std::string::npos) << range;
  EXPECT_NE(range.find("out of range"), std::string::npos) << range;
  // A default-constructed Array (no data) passed in says so, not "must be f32[], got f32[]".
  const std::string empty = testing::errorOf([] { jit([](const Tensor& t) { return silu(t); })(Array()); });
  EXPECT_NE(empty.find("holds no data: a default-constructed Array has none"), std::string::npos) << empty;
  // Outside a traced function the error names the composed function, not its parts.
  const std::string outside = testing::errorOf([] { silu(Tensor(randomArray(DType::f32, {2}, 1))); });
  EXPECT_NE(outside.find("silu"), std::string::npos) << outside;
}

}  // namespace
}  // namespace spmd
