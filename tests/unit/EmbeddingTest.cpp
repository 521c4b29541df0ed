// The embedding's kernels at sizes past the CPU's one-thread cutoff (runtime/cpu/Embedding.cpp:
// threaded row copies and a counting sort; the library's merge sort on sim): the lookup and the
// table's gradient are the host's row copies and position-ordered double sums, bit for bit, on
// both backends.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::expectSameBits;
using testing::randomArray;

TEST(EmbeddingTest, LargeLookupAndGradientAreTheHostsRowsAndSumsOnEveryBackend) {
  const int64_t rows = 2500, dim = 24, count = 2000;
  // Ids with repeats over the first 2300 rows (the rest get none), in no order.
  std::vector<int32_t> idList(count);
  for (int64_t p = 0; p < count; ++p) idList[p] = int32_t(p * 7919 % 2300);
  const Array table = randomArray(DType::f32, {rows, dim}, 1), weights = randomArray(DType::f32, {count, dim}, 2);
  const Array ids = Array::of<int32_t>({count}, idList);
  // The host's answer: row copies, and each table row the double sum of its ids' weight rows in
  // position order, rounded once.
  Array rowsWanted = Array::zeros(DType::f32, {count, dim}), gradWanted = Array::zeros(DType::f32, {rows, dim});
  std::vector<double> sums(rows * dim, 0.0);
  const auto from = table.values<float>(), w = weights.values<float>();
  auto picked = rowsWanted.values<float>(), summed = gradWanted.values<float>();
  for (int64_t p = 0; p < count; ++p)
    for (int64_t d = 0; d < dim; ++d) {
      picked[p * dim + d] = from[idList[p] * dim + d];
      sums[idList[p] * dim + d] += double(w[p * dim + d]);
    }
  for (int64_t i = 0; i < rows * dim; ++i) summed[i] = float(sums[i]);
  for (const char* devices : {"cpu", "sim"}) {
    SCOPED_TRACE(devices);
    auto f = jit(
        [](const Tensor& t, const Tensor& i, const Tensor& w) {
          auto [loss, grad] = value_and_grad([&](const Tensor& u) { return sum(mul(embedding(u, i), w), {0, 1}); })(t);
          return std::tuple{embedding(t, i), grad};
        },
        {.devices = devices});
    auto [looked, grad] = f(Tensor(table), Tensor(ids), Tensor(weights));
    expectSameBits(looked.array(), rowsWanted, "lookup");
    expectSameBits(grad.array(), gradWanted, "table gradient");
  }
}

}  // namespace
}  // namespace spmd
