// StepGraph: recording with splits at host synchronisation, and replay.
#include "runtime/exec/StepGraph.h"

#include "runtime/base/Parse.h"

namespace spmd::runtime {

bool StepGraph::wanted() { return envSwitch("SPMD_CUDA_GRAPHS").value_or(true); }

StepGraph StepGraph::record(GraphCapture& capture, size_t steps, std::vector<std::byte*> pointers,
                            const std::function<void(size_t)>& runStep) {
  StepGraph plan;
  plan.pointers_ = std::move(pointers);
  size_t begin = 0;
  bool capturing = false;
  // The steps [begin, end) recorded so far become a graph, launched at once (this call runs them),
  // or, where the graph cannot keep just them, run outside one at a time.
  auto close = [&](size_t end, size_t keep) {
    capturing = false;  // whatever end() does, the capture is over
    std::shared_ptr<const Graph> graph;
    try {
      graph = capture.end(keep);
    } catch (const CaptureBroken&) {
      for (size_t s = begin; s < end; ++s) {
        runStep(s);
        plan.parts_.push_back({s, s + 1, nullptr});
      }
      return;
    }
    if (end > begin && graph->launches() > 0) {
      capture.launch(*graph);
      plan.parts_.push_back({begin, end, graph});
    }
  };
  try {
    for (size_t s = 0; s < steps; ++s) {
      if (!capturing) capture.begin(), capturing = true, begin = s;
      const size_t mark = capture.recorded();
      try {
        runStep(s);
      } catch (const CaptureBroken&) {
        close(s, mark);  // this step's own recorded work is dropped: it runs again, outside
        runStep(s);
        plan.parts_.push_back({s, s + 1, nullptr});
      }
    }
    if (capturing) close(steps, capture.recorded());
  } catch (...) {
    if (capturing) capture.end(0);
    throw;
  }
  return plan;
}

void StepGraph::replay(GraphCapture& capture, const std::function<void(size_t)>& runStep) const {
  for (const Part& part : parts_) {
    if (part.graph)
      capture.launch(*part.graph);
    else
      runStep(part.begin);
  }
}

size_t StepGraph::graphs() const {
  size_t n = 0;
  for (const Part& part : parts_) n += part.graph != nullptr;
  return n;
}

size_t StepGraph::launches() const {
  size_t n = 0;
  for (const Part& part : parts_)
    if (part.graph) n += part.graph->launches();
  return n;
}

std::vector<size_t> StepGraph::splitters() const {
  std::vector<size_t> steps;
  for (const Part& part : parts_)
    if (!part.graph) steps.push_back(part.begin);
  return steps;
}

}  // namespace spmd::runtime
