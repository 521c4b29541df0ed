// Communicator::reduceScatter on top of the all-reduce; what axis_index returns; the device
// rendezvous switch.
#include "runtime/device/Communicator.h"

#include <cstring>

#include "runtime/base/Parse.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime {

namespace {
EnvSwitch deviceRendezvous("SPMD_DEVICE_RENDEZVOUS", true);
}  // namespace

bool deviceRendezvousWanted() { return deviceRendezvous.get(); }
void setDeviceRendezvous(std::optional<bool> on) { deviceRendezvous.set(on); }

int axisIndexOf(const KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  return attrsOf<AxisIndexAttrs>(call.step).of_device ? comm.rank() : comm.virtualRank();
}

Communicator::Pending Communicator::reduceScatter(const void* in, void* out, DType dtype, int64_t count,
                                                  Reduction op, const std::string& what, bool background) {
  auto staging = std::make_shared<std::vector<std::byte>>(size_t(count) * dtypeSize(dtype));
  Segment operand{const_cast<void*>(in), count}, result{staging->data(), count};
  Pending reduced = allReduce({&operand, 1}, {&result, 1}, dtype, op, what, background);
  const size_t row = staging->size() / size_t(size());
  const int mine = rank();
  return Pending([reduced, staging, out, row, mine]() mutable {
    reduced.wait();
    std::memcpy(out, staging->data() + size_t(mine) * row, row);
  });
}

}  // namespace spmd::runtime
