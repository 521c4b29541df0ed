// A Program's steps as device graphs (runtime/device/Graph.h), as PyTorch's CUDA graphs are
// used by hand and here automatically: the executor records the steps on a call after the first
// (every cache filled, every pointer in the arena fixed), running them as it records, and on
// later calls launches the recorded graphs instead of calling the kernels again. A step whose
// kernel synchronises with the host (an in-process collective's rendezvous) splits the graph:
// it runs outside, between the graphs before and after it. Data checks (labels) do not split it:
// the executor reads their device flags at the call's end (DeferredCheck). Replayed only while every buffer is
// where it was when recorded; SPMD_CUDA_GRAPHS=0 turns it off.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/device/Graph.h"

namespace spmd::runtime {

class StepGraph {
 public:
  // Whether SPMD_CUDA_GRAPHS allows graphs (default: yes).
  static bool wanted();
  // Runs steps [0, steps) through `runStep` while `capture` records them; `pointers` are the
  // buffers' addresses of this call.
  static StepGraph record(GraphCapture& capture, size_t steps, std::vector<std::byte*> pointers,
                          const std::function<void(size_t)>& runStep);
  // Launches the graphs, running the steps that split them through `runStep`.
  void replay(GraphCapture& capture, const std::function<void(size_t)>& runStep) const;
  const std::vector<std::byte*>& pointers() const { return pointers_; }
  size_t graphs() const;
  size_t launches() const;            // work items in the graphs
  std::vector<size_t> splitters() const;  // the steps that run outside

 private:
  struct Part {
    size_t begin, end;                    // steps [begin, end)
    std::shared_ptr<const Graph> graph;   // null: the one step runs outside a graph
  };
  std::vector<Part> parts_;
  std::vector<std::byte*> pointers_;
};

}  // namespace spmd::runtime
