// Trees in and out of checkpoints: a Tree's leaves stored under a prefix ("params.fc.weight"),
// and read back into the shape of a model's Tree with every name, dtype and shape checked.
#pragma once

#include <string>

#include "frontend/Tree.h"
#include "frontend/io/Safetensors.h"

namespace spmd::io {

// Adds every leaf of `tree` to `checkpoint` as "<prefix><name>" (copied to the host).
void addTree(Checkpoint& checkpoint, const std::string& prefix, const Tree& tree);

// A Tree with the names, dtypes and shapes of `like`, each leaf read from "<prefix><name>" of
// `checkpoint`. Throws spmd::Error naming `source` (the file), the tensor and what differs,
// followed by `hint` (e.g. "was it written with another --width?") when given.
Tree readTree(const Checkpoint& checkpoint, const std::string& prefix, const Tree& like, const std::string& source,
              const std::string& hint = "");

}  // namespace spmd::io
