// Stream capture, as CUDA graphs do it: between begin() and end() the work kernels queue on a
// device from the capturing thread is recorded instead of run; the Graph end() returns holds it
// with every pointer as it was, and launch() queues all of it again in one call, as often as
// the executor likes. A kernel that synchronises with the host while its device captures (a
// copy to the host, a wait for the stream) cannot be recorded: the device throws CaptureBroken
// at that point, and the executor runs that step outside the graph (runtime/exec/StepGraph.h).
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/base/Error.h"

namespace spmd::runtime {

class Graph {
 public:
  virtual ~Graph() = default;
  virtual size_t launches() const = 0;  // work items: kernels, copies, library calls
};

class CaptureBroken : public Error {
 public:
  using Error::Error;
};

class GraphCapture {
 public:
  virtual ~GraphCapture() = default;
  virtual void begin() = 0;
  virtual size_t recorded() const = 0;  // work items recorded since begin()
  // Stops recording; the first `keep` items recorded become the graph, the rest are dropped.
  // Throws CaptureBroken, the capture over, when the graph cannot drop its last items (CUDA
  // cannot delete nodes from a graph that holds memory allocations): then nothing recorded since
  // begin() has run or will, and the caller runs that work outside a graph.
  virtual std::shared_ptr<const Graph> end(size_t keep) = 0;
  virtual void launch(const Graph& graph) = 0;
};

}  // namespace spmd::runtime
