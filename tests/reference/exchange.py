"""The file exchange between spmd's tests and their PyTorch references: DIR/manifest.txt holds
lines "<name> <dtype> <dims...>", each tensor one raw little-endian DIR/<name>.bin."""
import os

import numpy as np
import torch

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


def read(directory):
    arrays = {}
    with open(os.path.join(directory, "manifest.txt")) as manifest:
        for line in manifest:
            name, dtype, *dims = line.split()
            data = np.fromfile(os.path.join(directory, name + ".bin"), dtype=DTYPES[dtype])
            arrays[name] = torch.from_numpy(data.reshape([int(d) for d in dims]))
    return arrays


def write(directory, name, tensor):
    tensor.detach().numpy().tofile(os.path.join(directory, name + ".bin"))
