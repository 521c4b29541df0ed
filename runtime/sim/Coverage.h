// What the simulator has executed in this process, for the coverage test (SimCoverageTest): the
// ops whose CUDA-backend code ran (kernel library, block kernels, the matmul bias) and the
// generated kernels by their source text.
#pragma once

#include <set>
#include <string>

namespace spmd::runtime::sim {

void recordExecutedOp(const std::string& op);
void recordExecutedSource(const std::string& source);
std::set<std::string> executedOps();
std::set<std::string> executedSources();

}  // namespace spmd::runtime::sim
