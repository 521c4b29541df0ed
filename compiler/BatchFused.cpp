// batchFusedSteps: runs of adjacent fused steps with one body become one step of several segments.
#include "compiler/BatchFused.h"

#include <algorithm>
#include <set>

#include "runtime/program/FusedBody.h"

namespace spmd {
namespace {

using runtime::Program;
using runtime::Step;

// Whether `step` can be a segment: a fused step over plain buffers of one dtype (f32 or f64: the
// segments' kernel reads and writes its compute type alone) and shape, its body loading every
// input directly.
bool batchable(const Step& step, const Program& program) {
  if (step.op != "fused" || step.attrs.size() != 1 || !step.attrs.count("body") || step.outputs.empty()) return false;
  const runtime::BufferDesc& first = program.buffers.at(size_t(step.outputs[0]));
  auto same = [&](int id) {
    const runtime::BufferDesc& b = program.buffers.at(size_t(id));
    return b.dtype == first.dtype && b.shape == first.shape && b.layout.empty() &&
           (b.dtype == DType::f32 || b.dtype == DType::f64);
  };
  if (!std::all_of(step.inputs.begin(), step.inputs.end(), same) ||
      !std::all_of(step.outputs.begin(), step.outputs.end(), same))
    return false;
  const runtime::FusedBody body = runtime::FusedBody::parse(step.text("body"));
  return std::none_of(body.instrs.begin(), body.instrs.end(), [](const runtime::FusedInstr& in) {
    return in.kind == runtime::FusedOpKind::load && in.broadcast;
  });
}

// Whether `next` may join a run whose steps are `run` (same body, dtype and arity, reads none of
// the run's outputs).
bool joins(const Step& next, const std::vector<const Step*>& run, const Program& program) {
  const Step& first = *run.front();
  if (next.text("body") != first.text("body") || next.inputs.size() != first.inputs.size() ||
      next.outputs.size() != first.outputs.size() ||
      program.buffers.at(size_t(next.outputs[0])).dtype != program.buffers.at(size_t(first.outputs[0])).dtype)
    return false;
  std::set<int> written;
  for (const Step* s : run) written.insert(s->outputs.begin(), s->outputs.end());
  return std::none_of(next.inputs.begin(), next.inputs.end(), [&](int id) { return written.count(id) > 0; });
}

Step merged(const std::vector<const Step*>& run) {
  Step step = *run.front();
  step.inputs.clear(), step.outputs.clear();
  for (const Step* s : run) {
    step.inputs.insert(step.inputs.end(), s->inputs.begin(), s->inputs.end());
    step.outputs.insert(step.outputs.end(), s->outputs.begin(), s->outputs.end());
  }
  step.attrs["segments"] = int64_t(run.size());
  return step;
}

}  // namespace

int batchFusedSteps(Program& program) {
  std::vector<Step> steps;
  std::vector<const Step*> run;
  int removed = 0;
  auto flush = [&] {
    if (run.size() >= 2) {
      const int64_t most = runtime::maxFusedSegments(run.front()->inputs.size(), run.front()->outputs.size());
      for (size_t begin = 0; begin < run.size(); begin += size_t(most)) {
        const std::vector<const Step*> part(run.begin() + long(begin),
                                            run.begin() + long(std::min(run.size(), begin + size_t(most))));
        steps.push_back(part.size() >= 2 ? merged(part) : *part.front());
        removed += int(part.size()) - 1;
      }
    } else if (run.size() == 1) {
      steps.push_back(*run.front());
    }
    run.clear();
  };
  for (const Step& step : program.steps) {
    if (!batchable(step, program)) {
      flush();
      steps.push_back(step);
      continue;
    }
    if (!run.empty() && !joins(step, run, program)) flush();
    run.push_back(&step);
  }
  flush();
  program.steps = std::move(steps);
  return removed;
}

}  // namespace spmd
