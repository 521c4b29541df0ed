// The public DSL in one include: tensors, trees, ops, initializers, nn layers, jit, pmap and
// collectives, grad/value_and_grad and optimizers. Models (frontend/models/ResNet.h), datasets
// (frontend/data/) and checkpoint files (frontend/io/Safetensors.h) are their own includes
// (installed: <spmd/models.h>, <spmd/data.h>, <spmd/io.h>).
#pragma once

#include "frontend/Agreement.h"
#include "frontend/Collectives.h"
#include "frontend/Composed.h"
#include "frontend/Einsum.h"
#include "frontend/Losses.h"
#include "frontend/Indexing.h"
#include "frontend/Volume.h"
#include "frontend/CustomOp.h"
#include "frontend/CustomVjp.h"
#include "frontend/Grad.h"
#include "frontend/Init.h"
#include "frontend/Jit.h"
#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "frontend/Pmap.h"
#include "frontend/Random.h"
#include "frontend/Remat.h"
#include "frontend/Processes.h"
#include "frontend/Tensor.h"
#include "frontend/Tree.h"
#include "frontend/nn/Activations.h"
#include "frontend/nn/Layers.h"
#include "frontend/nn/Module.h"
#include "frontend/optim/Adam.h"
#include "frontend/optim/Clip.h"
#include "frontend/optim/Ema.h"
#include "frontend/optim/Schedule.h"
#include "frontend/optim/Sgd.h"
