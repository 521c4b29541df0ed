// ProcessInfo's description and the job of one process.
#include "runtime/device/Job.h"

#include "runtime/base/Error.h"
#include "runtime/device/Communicator.h"

namespace spmd::runtime {

std::string ProcessInfo::describe() const {
  if (size == 1) return "";
  return "process " + std::to_string(rank) + " of " + std::to_string(size) + " (host " + host + ")";
}

namespace {

class SingleProcess final : public Job {
 public:
  const ProcessInfo& info() const override { return info_; }
  std::vector<std::unique_ptr<Communicator>> communicators(int, std::chrono::milliseconds, int) const override {
    throw Error("a job of one process has no other processes to communicate with");
  }
  void broadcast(std::vector<std::byte>&, const std::string&) const override {}
  std::vector<int64_t> allGather(int64_t value, const std::string&) const override { return {value}; }
  std::vector<std::string> allGatherText(const std::string& text, const std::string&) const override { return {text}; }

 private:
  ProcessInfo info_;
};

}  // namespace

const Job& Job::single() {
  static const SingleProcess one;
  return one;
}

}  // namespace spmd::runtime
