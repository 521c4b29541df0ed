// The one exception type spmd throws for bad input or failed execution, at every layer.
// Messages say what is wrong, where (the user's source line when known) and how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace spmd {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace spmd
