// Reference collective kernels, built on all-gather only: every replica gathers every
// replica's data and reduces it itself with the fold tree written recursively from its
// definition. A different algorithm from the CPU kernels (slice-per-rank reduction through
// FoldPlan), so tests can compare them.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/device/Communicator.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

std::string what(const KernelCall& call) { return call.step.op + " at " + call.step.location; }

std::vector<std::byte> gatherAll(Communicator& comm, const TensorView& v, const std::string& what) {
  size_t bytes = v.numel() * dtypeSize(v.dtype);
  std::vector<std::byte> all(bytes * comm.size());
  comm.allGather(v.data, all.data(), bytes, what).wait();
  return all;
}

// Node (level, index) of the fold tree over rows 0..n-1 at element i, by its definition
// (runtime/device/Fold.h), recursively: left op right, or the left alone where the right lies
// past the last row; i32 sums wrap.
template <typename T>
T node(const T* data, int64_t count, int64_t i, int n, int level, int64_t index, Reduction op) {
  if (level == 0) return data[index * count + i];
  T left = node(data, count, i, n, level - 1, 2 * index, op);
  if (((2 * index + 1) << (level - 1)) >= n) return left;
  T right = node(data, count, i, n, level - 1, 2 * index + 1, op);
  if (op == Reduction::Max) return nanMax(left, right);
  if (op == Reduction::Min) return nanMin(left, right);
  if constexpr (std::is_same_v<T, int32_t>) return static_cast<int32_t>(int64_t(left) + int64_t(right));
  return left + right;
}

template <typename T>
void reduceRows(const std::byte* rows, int n, int64_t count, Reduction op, T* out) {
  const T* data = reinterpret_cast<const T*>(rows);
  int levels = 0;
  while ((int64_t(1) << levels) < n) ++levels;
  for (int64_t i = 0; i < count; ++i) {
    T root = node(data, count, i, n, levels, 0, op);
    out[i] = op == Reduction::Mean ? static_cast<T>(root / T(n)) : root;
  }
}

void reduceRows(const std::byte* rows, int n, const TensorView& out, Reduction op) {
  switch (out.dtype) {
    case DType::f32: reduceRows<float>(rows, n, out.numel(), op, out.as<float>()); break;
    case DType::f64: reduceRows<double>(rows, n, out.numel(), op, out.as<double>()); break;
    case DType::i32: reduceRows<int32_t>(rows, n, out.numel(), op, out.as<int32_t>()); break;
    case DType::bf16: throw bf16NotWidened("a collective");
  }
}

}  // namespace

void all_reduce(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const AllReduceAttrs& attrs = attrsOf<AllReduceAttrs>(call.step);
  if (attrs.replica_groups.empty()) {
    for (size_t i = 0; i < call.in.size(); ++i)
      reduceRows(gatherAll(comm, call.in[i], what(call)).data(), comm.size(), call.out[i], attrs.reduction);
    return;
  }
  // Within this replica's group: its members' rows, in the group's order.
  const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
  for (size_t i = 0; i < call.in.size(); ++i) {
    const std::vector<std::byte> all = gatherAll(comm, call.in[i], what(call));
    const size_t row = all.size() / size_t(comm.size());
    std::vector<std::byte> rows(row * members.size());
    for (size_t k = 0; k < members.size(); ++k) std::memcpy(rows.data() + k * row, all.data() + size_t(members[k]) * row, row);
    reduceRows(rows.data(), int(members.size()), call.out[i], attrs.reduction);
  }
}

// Own input at its row of a zeroed buffer, then a sum over replicas (x + 0 is exact).
void all_gather(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  size_t bytes = in.numel() * dtypeSize(in.dtype);
  if (const AllGatherAttrs& attrs = attrsOf<AllGatherAttrs>(call.step); !attrs.replica_groups.empty()) {
    const std::vector<std::byte> all = gatherAll(comm, in, what(call));  // the members' rows, in the group's order
    const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    for (size_t k = 0; k < members.size(); ++k)
      std::memcpy(static_cast<std::byte*>(out.data) + k * bytes, all.data() + size_t(members[k]) * bytes, bytes);
    return;
  }
  std::memset(out.data, 0, bytes * comm.size());
  std::memcpy(static_cast<std::byte*>(out.data) + comm.rank() * bytes, in.data, bytes);
  comm.allReduceInPlace(out.data, out.dtype, out.numel(), Reduction::Sum, what(call));
}

// Every replica's operand gathered; this replica keeps its source's (or zeros).
void ppermute(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  const size_t bytes = in.numel() * dtypeSize(in.dtype);
  std::vector<std::byte> all = gatherAll(comm, in, what(call));
  const int64_t source = ppermuteSource(attrsOf<PpermuteAttrs>(call.step).pairs, comm.rank());
  if (source < 0) std::memset(out.data, 0, bytes);
  else std::memcpy(out.data, all.data() + source * bytes, bytes);
}

// Every replica's operand gathered; output element by element from its source replica's chunk.
// Within replica groups the sources are the group's members, in the group's order, and the
// chunk is the one at this replica's position in its group.
void all_to_all(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  const size_t e = dtypeSize(in.dtype), rank = in.rank();
  const AllToAllAttrs& attrs = attrsOf<AllToAllAttrs>(call.step);
  const std::vector<int64_t> members = groupOrAll(attrs.replica_groups, attrs.group_size, comm);
  const int64_t n = int64_t(members.size()), split = attrs.split_axis, concat = attrs.concat_axis;
  const int64_t me = std::find(members.begin(), members.end(), int64_t(comm.rank())) - members.begin();
  std::vector<std::byte> all = gatherAll(comm, in, what(call));
  const int64_t chunk = in.dim(size_t(split)) / n, block = split == concat ? chunk : in.dim(size_t(concat));
  std::vector<int64_t> index(rank);
  for (int64_t o = 0; o < out.numel(); ++o) {
    for (size_t d = rank, rest = size_t(o); d-- > 0;) index[d] = int64_t(rest % size_t(out.dim(d))), rest /= size_t(out.dim(d));
    const int64_t source = members[size_t(index[size_t(concat)] / block)];  // which replica's chunk this is
    index[size_t(concat)] %= block;
    index[size_t(split)] += me * chunk;  // my chunk of that replica's operand
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset = offset * in.dim(d) + index[d];
    std::memcpy(static_cast<std::byte*>(out.data) + size_t(o) * e, all.data() + (size_t(source) * size_t(in.numel()) + size_t(offset)) * e, e);
  }
}

void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView &in = call.in[0], &out = call.out[0];
  std::vector<std::byte> all = gatherAll(comm, in, what(call));  // [replica, axis, ...]
  size_t row = out.numel() * dtypeSize(out.dtype);
  if (const ReduceScatterAttrs& attrs = attrsOf<ReduceScatterAttrs>(call.step); !attrs.replica_groups.empty()) {
    // The members' rows at this replica's position in its group, in the group's order.
    const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    const size_t g = members.size(), position = size_t(std::find(members.begin(), members.end(), comm.rank()) - members.begin());
    std::vector<std::byte> rows(row * g);
    for (size_t k = 0; k < g; ++k)
      std::memcpy(rows.data() + k * row, all.data() + (size_t(members[k]) * g + position) * row, row);
    reduceRows(rows.data(), int(g), out, attrs.reduction);
    return;
  }
  std::vector<std::byte> mine(row * comm.size());  // row `rank` of every replica's input
  for (int r = 0; r < comm.size(); ++r)
    std::memcpy(mine.data() + r * row, all.data() + (r * comm.size() + comm.rank()) * row, row);
  reduceRows(mine.data(), comm.size(), out, attrsOf<ReduceScatterAttrs>(call.step).reduction);
}

void axis_index(KernelCall& call) { *call.out[0].as<int32_t>() = axisIndexOf(call); }

}  // namespace spmd::runtime::reference
