// Argument checks the DSL's functions share (frontend/Ops.cpp, Losses.cpp, Norms.cpp, Composed.cpp,
// Indexing.cpp):
// internal, not part of the DSL.
#pragma once

#include <string>

#include "frontend/Tensor.h"

namespace spmd::detail {

// "<file>:<line>: spmd::<name>: ", the prefix of an error of `name` called at `loc`; throws (as
// every traced op does) when nothing is being traced.
std::string calledAt(const char* name, Loc loc);
// Throws unless x is a float tensor (f32, f64, bf16), naming it as `what` of `name`.
void requireFloat(const Tensor& x, const char* what, const char* name, Loc loc);
// `axis` of x counted from the front (a negative one counts from the end); out of range, an error
// naming the axis as the caller wrote it.
int64_t checkedAxis(const Tensor& x, int64_t axis, const char* name, Loc loc);

}  // namespace spmd::detail
