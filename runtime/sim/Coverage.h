// What the simulator has executed in this process, for the coverage test (SimCoverageTest): the
// ops whose CUDA-backend code ran (kernel library, block kernels, the matmul bias), the kernel
// functors that ran by their type ("spmd::runtime::kernels::FoldRowsFn<float>"), and the
// generated kernels by their source text.
#pragma once

#include <set>
#include <string>

namespace spmd::runtime::sim {

void recordExecutedOp(const std::string& op);
void recordExecutedSource(const std::string& source);
void recordExecutedKernel(const std::string& op, const std::string& functor);  // both, one lock
std::set<std::string> executedOps();
std::set<std::string> executedSources();
std::set<std::string> executedKernels();

// The type after "F = " in a function's signature text: "... [with F = ns::Fn<float>; ...]"
// (GCC) or "... [F = ns::Fn<float>]" (clang).
inline std::string typeAfterF(const std::string& pretty) {
  const size_t at = pretty.find("F = ") + 4, end = pretty.find_first_of(";]", at);
  return pretty.substr(at, end - at);
}

// The type of F as the compiler spells it, for recordExecutedKernel.
template <typename F>
const std::string& functorName() {
  static const std::string name = typeAfterF(__PRETTY_FUNCTION__);
  return name;
}

}  // namespace spmd::runtime::sim
