// spmd::Tree: a named, ordered collection of tensors (parameters, BN state, optimizer state),
// keyed by dotted paths such as "stage2.0.conv1.weight", as a Flax/PyTorch state dict.
#pragma once

#include <map>
#include <string>

#include "frontend/Tensor.h"

namespace spmd {

class Tree {
 public:
  using Map = std::map<std::string, Tensor>;

  // Throws, naming the missing key and the caller's line.
  const Tensor& at(const std::string& name, Loc loc = Loc::current()) const;
  void set(const std::string& name, Tensor value) { items_[name] = std::move(value); }
  bool contains(const std::string& name) const { return items_.count(name) != 0; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  int64_t numElements() const;  // total scalar count over all leaves
  Map::const_iterator begin() const { return items_.begin(); }
  Map::const_iterator end() const { return items_.end(); }

 private:
  Map items_;
};

}  // namespace spmd
