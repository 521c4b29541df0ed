// Datasets of an installed spmd: Fashion-MNIST (spmd::data::loadFashionMnist), slicing and the
// per-epoch shuffle, and the prefetching loader.
#pragma once

#include "frontend/data/FashionMnist.h"
#include "frontend/data/Loader.h"
