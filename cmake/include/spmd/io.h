// Checkpoint files of an installed spmd: safetensors (spmd::io::saveSafetensors,
// loadSafetensors) and Trees in and out of them (spmd::io::addTree, readTree).
#pragma once

#include "frontend/io/Safetensors.h"
#include "frontend/io/TreeCheckpoint.h"
