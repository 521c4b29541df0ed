// The spmd passes (declared in Passes.td): constructors and command-line registration.
#pragma once

#include <memory>

#include "ir/SpmdDialect.h"
#include "mlir/Pass/Pass.h"

namespace spmd::passes {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

}  // namespace spmd::passes
