// Models of an installed spmd: the seeds' ResNet-18 (spmd::models::resnet18) and Flax CNN
// (spmd::models::cnn).
#pragma once

#include "frontend/models/Cnn.h"
#include "frontend/models/ResNet.h"
