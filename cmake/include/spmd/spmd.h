// The public include of an installed spmd: #include <spmd/spmd.h> gives the DSL (tensors, ops,
// nn layers, jit, pmap, grad, optimizers); see frontend/spmd.h.
#pragma once

#include "frontend/spmd.h"
