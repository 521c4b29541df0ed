// The public DSL in one include: tensors, trees, ops, initializers, nn layers, models, jit,
// pmap and collectives, grad/value_and_grad and optimizers.
#pragma once

#include "frontend/Collectives.h"
#include "frontend/Grad.h"
#include "frontend/data/FashionMnist.h"
#include "frontend/Init.h"
#include "frontend/Jit.h"
#include "frontend/Ops.h"
#include "frontend/Pmap.h"
#include "frontend/Processes.h"
#include "frontend/Tensor.h"
#include "frontend/Tree.h"
#include "frontend/models/ResNet.h"
#include "frontend/nn/Layers.h"
#include "frontend/nn/Module.h"
#include "frontend/optim/Adam.h"
#include "frontend/optim/Sgd.h"
