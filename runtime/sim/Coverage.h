// What the simulator has executed in this process, for the coverage test (SimCoverageTest): the
// ops whose CUDA-backend code ran (kernel library, block kernels, the matmul bias), the kernel
// functors that ran by their type ("spmd::runtime::kernels::FoldRowsFn<float>"), and the
// generated kernels by their source text.
#pragma once

#include <set>
#include <string>

#include "runtime/kernels/FunctorName.h"

namespace spmd::runtime::sim {

void recordExecutedOp(const std::string& op);
void recordExecutedSource(const std::string& source);
void recordExecutedKernel(const std::string& op, const std::string& functor);  // both, one lock
std::set<std::string> executedOps();
std::set<std::string> executedSources();
std::set<std::string> executedKernels();

using naming::functorName;
using naming::typeAfterF;

}  // namespace spmd::runtime::sim
