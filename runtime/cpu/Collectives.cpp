// CPU collective kernels: thin calls into the replica's Communicator. A combined all_reduce
// (several operands) packs them into one flat staging buffer, reduces it in one collective and
// unpacks, so a step's gradients cross replicas in one (or a few bucketed) exchanges.
#include <cstring>
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/cpu/Kernels.h"

namespace spmd::runtime::cpu {
namespace {
std::string what(const KernelCall& call) { return call.step.op + " at " + call.step.location; }
}  // namespace

void all_reduce(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  Reduction op = parseReduction(std::get<std::string>(call.step.attr("reduction")));
  DType dtype = call.in[0].dtype;
  if (call.later && comm.overlaps()) {
    // The communicator copies the operands now and reduces them on its own thread while the
    // following steps run; the executor calls `later` before a step reads the results.
    std::vector<Communicator::Segment> in, out;
    for (const TensorView& v : call.in) in.push_back({v.data, v.numel()});
    for (const TensorView& v : call.out) out.push_back({v.data, v.numel()});
    std::shared_ptr<void> pending = comm.allReduceStart(in, dtype, op, what(call));
    *call.later = [&comm, pending, out] { comm.allReduceFinish(pending, out); };
    return;
  }
  if (call.in.size() == 1) {
    size_t bytes = call.in[0].numel() * dtypeSize(dtype);
    if (call.out[0].data != call.in[0].data) std::memcpy(call.out[0].data, call.in[0].data, bytes);
    comm.allReduce(call.out[0].data, dtype, call.out[0].numel(), op, what(call));
    return;
  }
  if (!call.cache) {
    int64_t total = 0;
    for (const TensorView& v : call.in) total += v.numel();
    call.cache = std::make_shared<std::vector<std::byte>>(total * dtypeSize(dtype));
  }
  auto& staging = *static_cast<std::vector<std::byte>*>(call.cache.get());
  size_t offset = 0;
  for (const TensorView& v : call.in) {
    size_t bytes = v.numel() * dtypeSize(dtype);
    std::memcpy(staging.data() + offset, v.data, bytes);
    offset += bytes;
  }
  comm.allReduce(staging.data(), dtype, static_cast<int64_t>(offset / dtypeSize(dtype)), op,
                 what(call));
  offset = 0;
  for (const TensorView& v : call.out) {
    size_t bytes = v.numel() * dtypeSize(dtype);
    std::memcpy(v.data, staging.data() + offset, bytes);
    offset += bytes;
  }
}

void all_gather(KernelCall& call) {
  communicatorOf(call).allGather(call.in[0].data, call.out[0].data,
                                 call.in[0].numel() * dtypeSize(call.in[0].dtype), what(call));
}

// Sums the whole [N, ...] input over replicas, then keeps this replica's row.
void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const TensorView& in = call.in[0];
  size_t bytes = in.numel() * dtypeSize(in.dtype);
  if (!call.cache) call.cache = std::make_shared<std::vector<std::byte>>(bytes);
  auto& staging = *static_cast<std::vector<std::byte>*>(call.cache.get());
  std::memcpy(staging.data(), in.data, bytes);
  comm.allReduce(staging.data(), in.dtype, in.numel(), Reduction::Sum, what(call));
  size_t row = bytes / in.dim(0);
  std::memcpy(call.out[0].data, staging.data() + comm.rank() * row, row);
}

void axis_index(KernelCall& call) { *call.out[0].as<int32_t>() = communicatorOf(call).virtualRank(); }

}  // namespace spmd::runtime::cpu
