// Checkpoint files of an installed spmd: safetensors (spmd::io::saveSafetensors,
// loadSafetensors) and Trees in and out of them (spmd::io::addTree, readTree); arrays to and
// from DLPack without a copy (spmd::io::toDLPack, fromDLPack).
#pragma once

#include "frontend/io/DLPack.h"
#include "frontend/io/Safetensors.h"
#include "frontend/io/TreeCheckpoint.h"
