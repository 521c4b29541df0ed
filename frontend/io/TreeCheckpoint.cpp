// addTree / readTree: Trees in and out of checkpoints.
#include "frontend/io/TreeCheckpoint.h"

#include <cmath>

#include "runtime/base/Error.h"

namespace spmd::io {

void addTree(Checkpoint& checkpoint, const std::string& prefix, const Tree& tree) {
  for (const auto& [name, t] : tree) checkpoint.tensors[prefix + name] = t.array();
}

Tree readTree(const Checkpoint& checkpoint, const std::string& prefix, const Tree& like, const std::string& source,
              const std::string& hint) {
  const std::string suffix = hint.empty() ? "" : " (" + hint + ")";
  Tree out;
  for (const auto& [name, t] : like) {
    auto it = checkpoint.tensors.find(prefix + name);
    if (it == checkpoint.tensors.end())
      throw Error(source + ": checkpoint has no tensor '" + prefix + name + "'" + suffix);
    if (it->second.dtype != t.dtype() || it->second.shape != t.shape())
      throw Error(source + ": tensor '" + prefix + name + "' is " + Tensor(it->second).typeString() +
                  " but the model needs " + t.typeString() + suffix);
    // A NaN or infinity in saved state: a diverged run or damage, not something to train on.
    const Array& a = it->second;
    for (int64_t i = 0; i < a.numel() && a.dtype != DType::i32; ++i) {
      double v = a.dtype == DType::f32    ? double(a.values<float>()[i])
                 : a.dtype == DType::bf16 ? double(fromBf16(a.values<bf16>()[i]))
                                          : a.values<double>()[i];
      if (!std::isfinite(v))
        throw Error(source + ": tensor '" + prefix + name + "' holds " + (std::isnan(v) ? "NaN" : "an infinity") +
                    " at element " + std::to_string(i) + "; the checkpoint was saved from a diverged run or is "
                    "damaged: resume from an earlier one" + suffix);
    }
    out.set(name, a);
  }
  return out;
}

}  // namespace spmd::io
