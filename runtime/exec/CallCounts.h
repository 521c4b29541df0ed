// What one call of a compiled step did on its device, from the executor's own counters: how many
// graphs it launched, how many steps it ran by calling their kernels, and how often the host
// waited for the device while the steps ran. A step replayed as one graph launches 1, calls 0
// and waits 0 (runtime/exec/StepGraph.h); the benchmarks print these and the tests assert them.
#pragma once

#include <cstdint>

namespace spmd::runtime {

struct CallCounts {
  int64_t graphLaunches = 0;
  // Steps whose kernels were called: every step of a call without graphs (and of the call that
  // records them), only the steps that split the graphs on a replay.
  int64_t stepsCalled = 0;
  // Device::hostWaits while the steps ran; the one wait at the end of the call, which reads the
  // outputs and the data checks (DeferredCheck), is not counted.
  int64_t hostWaitsInSteps = 0;
  // Words of data checks (DeferredCheck: labels, ids, the in-process collectives' rendezvous) read
  // after the steps, in one copy to the host.
  int64_t checkWords = 0;
  // Arguments bound in place: values already on the devices in the placement the call takes,
  // copied neither from nor to the host (runtime/exec/ReplicatedCall.h).
  int64_t argumentsInPlace = 0;
  // Outputs computed straight into their donated input's buffers (runtime::inPlaceOutputs): no
  // copy after the steps, no bytes of their own.
  int64_t outputsInPlace = 0;
  CallCounts& operator+=(const CallCounts& o) {
    graphLaunches += o.graphLaunches, stepsCalled += o.stepsCalled, hostWaitsInSteps += o.hostWaitsInSteps;
    checkWords += o.checkWords, argumentsInPlace += o.argumentsInPlace, outputsInPlace += o.outputsInPlace;
    return *this;
  }
};

}  // namespace spmd::runtime
