// Internal to the frontend: the cache key of a compiled function (argument structure plus each
// input leaf's type, and for pmap how it is mapped) and a readable reason a call recompiled.
#pragma once

#include <string>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd::detail {

// `tags[i]`, when given, prefixes leaf i's type (pmap: "split:", "stacked:", "replicated:").
std::string signatureOf(const std::vector<Tensor>& leaves, const std::string& structure,
                        const std::vector<std::string>& tags = {});
// Why `now` differs from `before` ("first call", "input leaf 2 was f32[8] now f32[4]", ...).
std::string explain(const std::string& before, const std::string& now);

}  // namespace spmd::detail
