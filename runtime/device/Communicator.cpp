// Communicator::reduceScatter on top of the all-reduce; allReduceInGroup, permute and allToAll
// on top of the all-gather; what axis_index returns; the device rendezvous switch.
#include "runtime/device/Communicator.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/base/Parse.h"
#include "runtime/device/Fold.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/Catalog.h"
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

std::vector<int64_t> groupMembers(const std::vector<int64_t>& groups, int64_t groupSize, int rank) {
  for (size_t at = 0; groupSize > 0 && at + size_t(groupSize) <= groups.size(); at += size_t(groupSize))
    for (size_t k = at; k < at + size_t(groupSize); ++k)
      if (groups[k] == rank) return std::vector<int64_t>(groups.begin() + int64_t(at), groups.begin() + int64_t(at) + groupSize);
  throw Error("replica " + std::to_string(rank) + " is in none of the all_reduce's replica groups; this is a bug in "
              "spmd (checkProgram holds every replica to one group)");
}

std::vector<int64_t> groupOrAll(const std::vector<int64_t>& groups, int64_t groupSize, const Communicator& comm) {
  if (!groups.empty()) return groupMembers(groups, groupSize, comm.rank());
  std::vector<int64_t> all(size_t(comm.size()));
  std::iota(all.begin(), all.end(), int64_t(0));
  return all;
}

Communicator::Pending Communicator::allReduceInGroup(std::span<const Segment> in, std::span<const Segment> out,
                                                     DType dtype, Reduction op, std::span<const int64_t> members,
                                                     const std::string& what) {
  const size_t e = dtypeSize(dtype);
  int64_t total = 0;
  for (const Segment& s : in) total += s.count;
  std::vector<std::byte> packed(size_t(total) * e), all(packed.size() * size_t(size()));
  size_t offset = 0;
  for (const Segment& s : in) std::memcpy(packed.data() + offset, s.data, size_t(s.count) * e), offset += size_t(s.count) * e;
  allGather(packed.data(), all.data(), packed.size(), what).wait();
  std::vector<const void*> rows;
  for (int64_t r : members) rows.push_back(all.data() + size_t(r) * packed.size());
  foldTree(dtype, rows.data(), int(rows.size()), 0, total, op, int(rows.size()), packed.data());
  offset = 0;
  for (const Segment& s : out) std::memcpy(s.data, packed.data() + offset, size_t(s.count) * e), offset += size_t(s.count) * e;
  return {};
}

Communicator::Pending Communicator::allGatherInGroup(const void* in, void* out, size_t bytes,
                                                     std::span<const int64_t> members, const std::string& what) {
  std::vector<std::byte> all(bytes * size_t(size()));
  allGather(in, all.data(), bytes, what).wait();
  for (size_t k = 0; k < members.size(); ++k)
    std::memcpy(static_cast<std::byte*>(out) + k * bytes, all.data() + size_t(members[k]) * bytes, bytes);
  return {};
}

Communicator::Pending Communicator::reduceScatterInGroup(const void* in, void* out, DType dtype, int64_t count,
                                                         Reduction op, std::span<const int64_t> members,
                                                         const std::string& what) {
  const size_t e = dtypeSize(dtype), bytes = size_t(count) * e, row = bytes / members.size();
  std::vector<std::byte> all(bytes * size_t(size()));
  allGather(in, all.data(), bytes, what).wait();
  const size_t position = size_t(std::find(members.begin(), members.end(), int64_t(rank())) - members.begin());
  std::vector<const void*> rows;
  for (int64_t r : members) rows.push_back(all.data() + size_t(r) * bytes + position * row);
  foldTree(dtype, rows.data(), int(rows.size()), 0, int64_t(row / e), op, int(rows.size()), out);
  return {};
}

Communicator::Pending Communicator::permute(const void* in, void* out, size_t bytes, std::span<const int64_t> pairs,
                                            const std::string& what) {
  std::vector<std::byte> all(bytes * size_t(size()));
  allGather(in, all.data(), bytes, what).wait();
  const int64_t source = ppermuteSource(pairs, rank());
  if (source < 0) std::memset(out, 0, bytes);
  else std::memcpy(out, all.data() + size_t(source) * bytes, bytes);
  return {};
}

Communicator::Pending Communicator::allToAll(const void* in, void* out, size_t blockBytes, const std::string& what) {
  const size_t n = size_t(size()), bytes = blockBytes * n;
  std::vector<std::byte> all(bytes * n);
  allGather(in, all.data(), bytes, what).wait();
  for (size_t j = 0; j < n; ++j)
    std::memcpy(static_cast<std::byte*>(out) + j * blockBytes, all.data() + j * bytes + size_t(rank()) * blockBytes,
                blockBytes);
  return {};
}

Communicator::Pending Communicator::allToAllInGroup(const void* in, void* out, size_t blockBytes,
                                                   std::span<const int64_t> members, const std::string& what) {
  const size_t g = members.size(), bytes = blockBytes * g;
  const size_t position = size_t(std::find(members.begin(), members.end(), int64_t(rank())) - members.begin());
  std::vector<std::byte> all(bytes * size_t(size()));
  allGather(in, all.data(), bytes, what).wait();
  for (size_t k = 0; k < g; ++k)
    std::memcpy(static_cast<std::byte*>(out) + k * blockBytes,
                all.data() + size_t(members[k]) * bytes + position * blockBytes, blockBytes);
  return {};
}

}  // namespace spmd::runtime
