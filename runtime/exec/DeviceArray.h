// A value that lives on the devices of a replica group (jax.Array's model): one buffer per
// replica, in that replica's device memory. A replicated value has a copy on every replica; a
// sharded one holds each replica's chunk, the global value being the chunks concatenated in
// replica order (a stacked [devices, ...] or a split [devices * n, ...] value). Passed to the
// next call on the same devices it is bound in place; it is copied to the host only when read
// (host(), once, then cached). A mesh value (spmd::shardMap's results) holds in each replica the
// block of the whole value its mesh coordinates select (runtime/exec/MeshParts.h); its global
// shape is the whole value's, and reading it puts the whole together from every replica's block,
// under several processes gathering theirs (every process reads it at the same point). A sliced value (ZeRO-1's sharded parameters and optimizer state,
// PmapOptions::shardUpdate) is a tensor of any shape flattened and split into equal slices, one
// per replica of the whole job (the last padded with zeros); under several processes reading it
// gathers the other processes' slices, so every process must read it at the same point. A donated value gives its buffers to a call's output and can no
// longer be used.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/Array.h"
#include "runtime/device/Device.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

// For a sliced or mesh DeviceArray: where this process's replicas sit among the job's, and how to
// fetch the other processes' bytes (this process's parts in, every process's out, in process
// order); for a mesh value also the mesh and the value's spec.
struct SliceSpread {
  int firstReplica = 0, totalReplicas = 1;
  std::function<std::vector<std::string>(const std::string&)> gatherProcesses;
  MeshShape mesh = {};
  std::vector<std::string> spec = {};
};

class DeviceArray {
 public:
  enum class Layout { Replicated, Sharded, Sliced, Mesh };
  using Slicing = SliceSpread;

  DeviceArray(DType dtype, Shape local, Shape global, Layout layout, std::vector<std::shared_ptr<Device>> devices,
              std::vector<std::shared_ptr<std::byte>> buffers, Slicing slicing = {});

  DType dtype() const { return dtype_; }
  const Shape& localShape() const { return local_; }  // one replica's part
  const Shape& globalShape() const { return global_; }
  Layout layout() const { return layout_; }
  const Slicing& slicing() const { return slicing_; }
  int replicas() const { return static_cast<int>(devices_.size()); }
  // Whether the buffers live on exactly these devices, replica by replica (same device names).
  bool livesOn(const std::vector<std::shared_ptr<Device>>& devices) const;
  // The device replica r's buffer lives on.
  const std::shared_ptr<Device>& device(int r) const { return devices_.at(size_t(r)); }
  // Replica r's buffer; throws when the value was donated.
  std::shared_ptr<std::byte> buffer(int r) const;
  // Replica r's bytes on the host (one replica's part; copied from its device).
  std::vector<std::byte> replicaBytes(int r) const;
  // The global value on the host: copied from the devices on the first call, then kept.
  const Array& host() const;
  // Gives the buffers away (to the output of `to`); every later use throws naming `to`, and,
  // with `failedCall`, saying that call failed after it may have written into them.
  void donate(const std::string& to, bool failedCall = false);
  bool donated() const;
  // Whether every replica's buffer is host memory (cpu devices), readable in place.
  bool hostMemory() const;
  // Lends replica 0's buffer to `to` (DLPack: another library reads it in place, on the host or
  // on its GPU), after which donating the value is refused: a call writing into its buffers would
  // change what `to` reads.
  void lend(const std::string& to);
  // Throws, naming `call` and the borrower, when the value was lent; before a call donates it.
  void checkDonatable(const std::string& call) const;
  // "f32[4, 10] on sim:0, sim:1 (sharded)", for messages.
  std::string describe() const;

 private:
  void checkUsable() const;
  // Every replica's part of the job in replica order: this process's, then (under several
  // processes) everyone's, gathered.
  std::string everyReplicasBytes() const;
  DType dtype_;
  Shape local_, global_;
  Layout layout_;
  Slicing slicing_;
  std::vector<std::shared_ptr<Device>> devices_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<std::byte>> buffers_;
  mutable std::optional<Array> host_;
  std::string donatedTo_, lentTo_;
  bool failedCall_ = false;
};

}  // namespace spmd::runtime
