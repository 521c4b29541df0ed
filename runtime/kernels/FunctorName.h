// A kernel functor's type as the compiler spells it ("spmd::runtime::kernels::NormSliceFn<float>"):
// the name the simulator's coverage records and SPMD_PROFILE=kernels prints for each launch.
#pragma once

#include <string>

// Outside the kernels' namespace, so that the compiler spells their types in full.
namespace spmd::runtime::naming {

// The type after "F = " in a function's signature text: "... [with F = ns::Fn<float>; ...]"
// (GCC, nvcc) or "... [F = ns::Fn<float>]" (clang); the whole text where there is none.
inline std::string typeAfterF(const std::string& pretty) {
  const size_t found = pretty.find("F = ");
  if (found == std::string::npos) return pretty;
  const size_t at = found + 4, end = pretty.find_first_of(";]", at);
  return pretty.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

template <typename F>
const std::string& functorName() {
  static const std::string name = typeAfterF(__PRETTY_FUNCTION__);
  return name;
}

}  // namespace spmd::runtime::naming
