// The simulator's record of executed kernels: two sets behind a mutex (stream threads record).
#include "runtime/sim/Coverage.h"

#include <mutex>

namespace spmd::runtime::sim {
namespace {

struct Record {
  std::mutex mutex;
  std::set<std::string> ops, sources, kernels;
};

Record& record() {
  static Record r;
  return r;
}

}  // namespace

void recordExecutedOp(const std::string& op) {
  std::lock_guard lock(record().mutex);
  record().ops.insert(op);
}

void recordExecutedSource(const std::string& source) {
  std::lock_guard lock(record().mutex);
  record().sources.insert(source);
}

void recordExecutedKernel(const std::string& op, const std::string& functor) {
  std::lock_guard lock(record().mutex);
  record().ops.insert(op);
  record().kernels.insert(functor);
}

std::set<std::string> executedKernels() {
  std::lock_guard lock(record().mutex);
  return record().kernels;
}

std::set<std::string> executedOps() {
  std::lock_guard lock(record().mutex);
  return record().ops;
}

std::set<std::string> executedSources() {
  std::lock_guard lock(record().mutex);
  return record().sources;
}

}  // namespace spmd::runtime::sim
