// DeviceArray: per-replica buffers, host read-back on demand, donation.
#include "runtime/exec/DeviceArray.h"

#include <cstring>

#include "runtime/exec/MeshParts.h"

namespace spmd::runtime {

DeviceArray::DeviceArray(DType dtype, Shape local, Shape global, Layout layout,
                         std::vector<std::shared_ptr<Device>> devices, std::vector<std::shared_ptr<std::byte>> buffers,
                         Slicing slicing)
    : dtype_(dtype), local_(std::move(local)), global_(std::move(global)), layout_(layout),
      slicing_(std::move(slicing)), devices_(std::move(devices)), buffers_(std::move(buffers)) {
  if (devices_.empty() || devices_.size() != buffers_.size())
    throw Error("DeviceArray needs one buffer per device, got " + std::to_string(buffers_.size()) + " for " +
                std::to_string(devices_.size()) + " devices");
  if (layout_ == Layout::Sliced) {
    const int64_t slice = numElements(local_), n = numElements(global_), total = slicing_.totalReplicas;
    if (local_.size() != 1 || total < replicas() || slicing_.firstReplica < 0 ||
        slicing_.firstReplica + replicas() > total || slice != (n + total - 1) / total)
      throw Error("DeviceArray: " + shapeString(local_) + " is not the slice of " + shapeString(global_) +
                  " for replicas " + std::to_string(slicing_.firstReplica) + ".." +
                  std::to_string(slicing_.firstReplica + replicas() - 1) + " of " + std::to_string(total));
    return;
  }
  if (layout_ == Layout::Mesh) {
    const int total = slicing_.totalReplicas;
    if (slicing_.mesh.replicas() != total || slicing_.firstReplica < 0 || slicing_.firstReplica + replicas() > total ||
        global_ != meshWholeShape(local_, slicing_.mesh, slicing_.spec))
      throw Error("DeviceArray: " + shapeString(local_) + " is not the block of " + shapeString(global_) + " by " +
                  specString(slicing_.spec) + " for replicas " + std::to_string(slicing_.firstReplica) + ".." +
                  std::to_string(slicing_.firstReplica + replicas() - 1) + " of mesh " + slicing_.mesh.describe());
    return;
  }
  int64_t expected = numElements(local_) * (layout_ == Layout::Sharded ? replicas() : 1);
  if (numElements(global_) != expected)
    throw Error("DeviceArray: global shape " + shapeString(global_) + " does not hold " + std::to_string(replicas()) +
                " parts of " + shapeString(local_));
}

bool DeviceArray::livesOn(const std::vector<std::shared_ptr<Device>>& devices) const {
  if (devices.size() != devices_.size()) return false;
  for (size_t r = 0; r < devices.size(); ++r)
    if (devices[r] != devices_[r] && devices[r]->name() != devices_[r]->name()) return false;
  return true;
}

void DeviceArray::checkUsable() const {
  if (!donatedTo_.empty())
    throw Error("the value " + std::string(dtypeName(dtype_)) + shapeString(global_) + " was donated to " +
                donatedTo_ + " and can no longer be used; " +
                (failedCall_ ? "that call failed after it may have written into its buffers: restore the value from a "
                               "checkpoint or compute it again"
                             : "use that call's result instead"));
}

std::shared_ptr<std::byte> DeviceArray::buffer(int r) const {
  std::lock_guard lock(mutex_);
  checkUsable();
  return buffers_.at(r);
}

bool DeviceArray::donated() const {
  std::lock_guard lock(mutex_);
  return !donatedTo_.empty();
}

void DeviceArray::donate(const std::string& to, bool failedCall) {
  std::lock_guard lock(mutex_);
  checkUsable();
  donatedTo_ = to;
  failedCall_ = failedCall;
  buffers_.clear();  // a host copy read before stays alive: references to it must not dangle
}

bool DeviceArray::hostMemory() const {
  for (const auto& device : devices_)
    if (!device->hostAccessible()) return false;
  return true;
}

void DeviceArray::lend(const std::string& to) {
  std::lock_guard lock(mutex_);
  checkUsable();
  lentTo_ = to;
}

void DeviceArray::checkDonatable(const std::string& call) const {
  std::lock_guard lock(mutex_);
  if (!lentTo_.empty())
    throw Error(describe() + " was lent to " + lentTo_ + " without a copy, so " + call +
                " cannot write into its buffers (donateArguments): do not donate it, or export a copy instead "
                "(io::toDLPack(tensor.array()))");
}

const Array& DeviceArray::host() const {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (!host_ && layout_ == Layout::Sliced) {
    const std::string all = everyReplicasBytes();
    Array array = Array::zeros(dtype_, global_);
    std::memcpy(array.data(), all.data(), array.bytes());
    host_ = std::move(array);
  } else if (!host_ && layout_ == Layout::Mesh) {
    host_ = assembleMeshParts(reinterpret_cast<const std::byte*>(everyReplicasBytes().data()), dtype_, local_,
                              slicing_.mesh, slicing_.spec, describe());
  } else if (!host_) {
    Array array = Array::zeros(dtype_, global_);
    size_t chunk = static_cast<size_t>(numElements(local_)) * dtypeSize(dtype_);
    int parts = layout_ == Layout::Sharded ? replicas() : 1;
    for (int r = 0; r < parts; ++r) {
      devices_[r]->activate();
      devices_[r]->copyToHost(array.data() + r * chunk, buffers_[r].get(), chunk);
    }
    host_ = std::move(array);
  }
  return *host_;
}

std::string DeviceArray::describe() const {
  std::string text = std::string(dtypeName(dtype_)) + shapeString(global_) + " on ";
  for (size_t r = 0; r < devices_.size(); ++r) text += (r ? ", " : "") + devices_[r]->name();
  if (layout_ == Layout::Mesh) return text + " (mesh " + slicing_.mesh.describe() + ", spec " + specString(slicing_.spec) + ")";
  return text + (layout_ == Layout::Sharded ? " (sharded)" : layout_ == Layout::Sliced ? " (sliced, ZeRO-1)" : " (replicated)");
}

std::string DeviceArray::everyReplicasBytes() const {
  const size_t part = size_t(numElements(local_)) * dtypeSize(dtype_);
  std::string mine(part * replicas(), '\0');
  for (int r = 0; r < replicas(); ++r) {
    devices_[r]->activate();
    devices_[r]->copyToHost(reinterpret_cast<std::byte*>(mine.data()) + r * part, buffers_[r].get(), part);
  }
  if (replicas() == slicing_.totalReplicas) return mine;
  if (!slicing_.gatherProcesses)
    throw Error("DeviceArray: " + describe() + " holds " + std::to_string(replicas()) + " of " +
                std::to_string(slicing_.totalReplicas) + " replicas' parts and cannot fetch the others");
  std::string all;
  for (const std::string& theirs : slicing_.gatherProcesses(mine)) all += theirs;
  if (all.size() != part * size_t(slicing_.totalReplicas))
    throw Error("DeviceArray: the processes sent " + std::to_string(all.size()) + " bytes of " + describe() + ", not the " +
                std::to_string(part * size_t(slicing_.totalReplicas)) + " of its " +
                std::to_string(slicing_.totalReplicas) + " replicas' parts");
  return all;
}

}  // namespace spmd::runtime

namespace spmd::runtime {

std::vector<std::byte> DeviceArray::replicaBytes(int r) const {
  std::shared_ptr<std::byte> from = buffer(r);
  std::vector<std::byte> out(size_t(numElements(local_)) * dtypeSize(dtype_));
  if (!out.empty()) devices_.at(r)->copyToHost(out.data(), from.get(), out.size());
  return out;
}

}  // namespace spmd::runtime
