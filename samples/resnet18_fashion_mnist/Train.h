// The training run: data, model, data-parallel train and eval steps, epochs, metrics,
// checkpoints and resuming.
#pragma once

#include "Flags.h"

namespace sample {

// Runs training as the flags say; returns the last test accuracy (0..1). Throws spmd::Error.
double train(const Flags& flags);

}  // namespace sample
