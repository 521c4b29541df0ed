// Models of an installed spmd: the seeds' ResNet-18 (spmd::models::resnet18).
#pragma once

#include "frontend/models/ResNet.h"
