// addTree / readTree: Trees in and out of checkpoints.
#include "frontend/io/TreeCheckpoint.h"

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
    out.set(name, it->second);
  }
  return out;
}

}  // namespace spmd::io
