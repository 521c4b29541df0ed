// Reference collective kernels, built on all-gather only: every replica gathers every
// replica's data and reduces it itself, in rank order with double accumulation. A different
// algorithm from the CPU kernels (slice-per-rank reduction), so tests can compare them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/device/Communicator.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {
namespace {

std::string what(const KernelCall& call) { return call.step.op + " at " + call.step.location; }

std::vector<std::byte> gatherAll(Communicator& comm, const TensorView& v, const std::string& what) {
  size_t bytes = v.numel() * dtypeSize(v.dtype);
  std::vector<std::byte> all(bytes * comm.size());
  comm.allGather(v.data, all.data(), bytes, what);
  return all;
}

template <typename T, typename Acc>
void reduceRows(const std::byte* rows, int n, int64_t count, Reduction op, T* out) {
  const T* data = reinterpret_cast<const T*>(rows);
  for (int64_t i = 0; i < count; ++i) {
    Acc acc = data[i];
    for (int r = 1; r < n; ++r) {
      Acc v = data[r * count + i];
      if (op == Reduction::Max) acc = nanMax(acc, v);
      else if (op == Reduction::Min) acc = nanMin(acc, v);
      else acc += v;
    }
    if (op == Reduction::Mean) acc /= n;
    out[i] = static_cast<T>(acc);
  }
}

void reduceRows(const std::byte* rows, int n, const TensorView& out, Reduction op) {
  switch (out.dtype) {
    case DType::f32: reduceRows<float, double>(rows, n, out.numel(), op, out.as<float>()); break;
    case DType::f64: reduceRows<double, double>(rows, n, out.numel(), op, out.as<double>()); break;
    case DType::i32: reduceRows<int32_t, int64_t>(rows, n, out.numel(), op, out.as<int32_t>()); break;
  }
}

}  // namespace

void all_reduce(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const Reduction op = parseReduction(call.step.text("reduction"));
  for (size_t i = 0; i < call.in.size(); ++i)
    reduceRows(gatherAll(comm, call.in[i], what(call)).data(), comm.size(), call.out[i], op);
}

// Own input at its row of a zeroed buffer, then a sum over replicas (x + 0 is exact).
void all_gather(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  size_t bytes = in.numel() * dtypeSize(in.dtype);
  std::memset(out.data, 0, bytes * comm.size());
  std::memcpy(static_cast<std::byte*>(out.data) + comm.rank() * bytes, in.data, bytes);
  comm.allReduce(out.data, out.dtype, out.numel(), Reduction::Sum, what(call));
}

void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  std::vector<std::byte> all = gatherAll(comm, in, what(call));  // [replica, axis, ...]
  size_t row = out.numel() * dtypeSize(out.dtype);
  std::vector<std::byte> mine(row * comm.size());  // row `rank` of every replica's input
  for (int r = 0; r < comm.size(); ++r)
    std::memcpy(mine.data() + r * row, all.data() + (r * comm.size() + comm.rank()) * row, row);
  reduceRows(mine.data(), comm.size(), out, Reduction::Sum);
}

void axis_index(KernelCall& call) { *call.out[0].as<int32_t>() = communicatorOf(call).rank(); }

}  // namespace spmd::runtime::reference
