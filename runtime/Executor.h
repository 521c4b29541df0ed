// Runs a Program on one Device: allocates the memory plan's arena and every unplanned buffer
// once, then per call binds the inputs, runs the steps in order and returns the outputs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "runtime/Array.h"
#include "runtime/Communicator.h"
#include "runtime/Device.h"
#include "runtime/Program.h"

namespace spmd::runtime {

class Executor {
 public:
  // Fails with a clear error when the device has no kernel for one of the program's ops.
  Executor(Program program, std::shared_ptr<Device> device);
  // With SPMD_PROFILE set, prints the time spent per op over all runs to stderr.
  ~Executor();

  // Returns every output as a fresh host Array.
  std::vector<Array> run(std::span<const Array> inputs);
  // Copies output i into outputs[i] (which must have its dtype and shape); an output Array
  // without storage is skipped (a replicated output another replica returns).
  void run(std::span<const Array> inputs, std::span<Array> outputs);
  // The collectives of this replica; needed by programs with collective ops.
  void setCommunicator(Communicator* comm) { comm_ = comm; }
  const Program& program() const { return program_; }
  const Device& device() const { return *device_; }

 private:
  Program program_;
  std::shared_ptr<Device> device_;
  std::vector<std::shared_ptr<std::byte>> buffers_;  // by buffer id; null for host-bound inputs
  std::vector<KernelFn> kernels_;                    // by step
  std::vector<std::shared_ptr<void>> caches_;        // by step
  Communicator* comm_ = nullptr;
  bool profile_ = false;
  std::map<std::string, std::pair<double, int64_t>> opTime_;  // seconds, calls (SPMD_PROFILE)
  int64_t runs_ = 0;
};

}  // namespace spmd::runtime
