#!/usr/bin/env python3
"""PyTorch side of ComposedTorchTest: torch's min, logsumexp, var, std, index_select (jnp.take), gather and clamp
of DIR's "x.<name>" in f64, and the gradient of sum(result * "g.<name>") with respect to x,
written back as "y.<name>" and "dx.<name>". Each case comes on the command line as NAME KIND ARG:
KIND min, logsumexp (ARG: the axes, comma-separated), var and std (ARG: axes/correction), take, gather
(torch.gather: take_along_axis), scatter (torch.scatter_add of x and twice its gather), scatter_set
(torch.scatter of twice the gather), scatter_amax (torch.scatter_reduce "amax" of the gather itself: ties)
and scatter_amin ("amin" of 1.5 times the gather) (ARG: the axis;
segment_sum and segment_max take ARG: the segments, and the ids as the indices; index_add and
index_copy (torch's, of twice x's slices at the indices) take ARG: the axis; index_get (x[i, j]: ARG k, the
indices' first axis holding the k index tensors) and index_put (x.index_put of twice x[i, j]: ARG
k,accumulate); index_at, index_at_set and index_at_add (x[index], and x with twice x[index] written or added
there: ARG the index as ComposedTorchTest's indexOf reads it, entries separated by commas: "..." an
ellipsis, "n" a new axis (None), "a:b:c" a slice, parts optional, an integer, "tD.D..." the next index tensor
of that shape cut from the flat i32 indices; integers among tensors become tensors of shape [1], for NumPy's
rule, which torch follows for tensors only; index_at_add's spec holds no new axis);
einsum (torch.einsum; ARG: the equation with "=" for "->" (a shell would read ">"), then "/" and each
operand's shape, dims separated by ".", the operands cut in order from x, which is flat);
the i32 indices are "i.<name>"), smoothed (cross-entropy of logits x and labels "i.<name>", ARG: the label
smoothing), upsample (nearest, ARG: the factors sh,sw), clamp (ARG: low,high), cumsum (ARG: the axis), sort
(ARG: axis,descending), topk (ARG: k), or argsort_ties and topk_indices (indices on ties, as f64; ARG: the axis, k). Files in DIR as tests/reference/exchange.py describes.

usage: torch_composed.py DIR [NAME KIND ARG]...
"""
import sys

import torch

from exchange import read, write


def index_of(spec, flat, rank):
    """The index SPEC names (see the docstring) as a tuple of one entry per axis of x, the ellipsis
    expanded into whole slices."""
    entries, used = [], 0
    parts = spec.split(",")
    tensors = any(part.startswith("t") for part in parts)
    for part in parts:
        if part == "...":
            entries += [slice(None)] * (rank - (len(parts) - 1) + parts.count("n"))
        elif part == "n":
            entries.append(None)
        elif ":" not in part and not part.startswith("t"):
            entries.append(torch.tensor([int(part)]) if tensors else int(part))
        elif part.startswith("t"):
            shape = tuple(int(v) for v in part[1:].split("."))
            count = 1
            for v in shape:
                count *= v
            entries.append(flat[used:used + count].reshape(shape).long())
            used += count
        else:
            entries.append(slice(*(int(v) if v else None for v in part.split(":"))))
    return tuple(entries)


def indexed(kind, spec, x, flat):
    """x[index] (index_at), or x with twice x[index] written there (index_at_set) or added
    (index_at_add, through aten::index_put with the slices as whole axes of x's sliced view)."""
    at = index_of(spec, flat, x.dim())
    if kind == "index_at":
        return x[at]
    y = x.clone()
    if kind == "index_at_set":
        y[at] = 2 * x[at]
        return y
    view = tuple(slice(None) if torch.is_tensor(e) else e for e in at)
    tensors = [e if torch.is_tensor(e) else None for e in at]
    y[view] = torch.ops.aten.index_put(x[view], tensors, 2 * x[at], True)
    return y


def einsum(arg, x):
    """torch.einsum of the operands cut from the flat x (see the docstring)."""
    parts = arg.split("/")
    operands, used = [], 0
    for shape_text in parts[1:]:
        shape = tuple(int(v) for v in shape_text.split(".") if v)
        count = 1
        for v in shape:
            count *= v
        operands.append(x[used:used + count].reshape(shape))
        used += count
    return torch.einsum(parts[0].replace("=", "->"), *operands)


def apply(kind, arg, x, indices):
    if kind == "einsum":
        return einsum(arg, x)
    if kind.startswith("index_at"):
        return indexed(kind, arg, x, indices)
    if kind in ("var", "std"):
        axes, correction = arg.split("/")
        fn = torch.var if kind == "var" else torch.std
        return fn(x, dim=tuple(int(v) for v in axes.split(",")), correction=int(correction))
    numbers = [float(v) for v in arg.split(",")]
    if kind == "min":
        return torch.amin(x, dim=tuple(int(v) for v in numbers))
    if kind == "logsumexp":
        return torch.logsumexp(x, dim=tuple(int(v) for v in numbers))
    if kind == "take":
        axis = int(numbers[0]) % x.dim()
        picked = torch.index_select(x, axis, indices.flatten().long())
        return picked.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1:])
    if kind == "gather":  # torch.gather(x, axis, indices): jnp.take_along_axis
        return torch.gather(x, int(numbers[0]) % x.dim(), indices.long())
    if kind == "scatter":  # torch.scatter_add of twice the gathered values: both paths of the gradient
        axis = int(numbers[0]) % x.dim()
        return torch.scatter_add(x, axis, indices.long(), 2 * torch.gather(x, axis, indices.long()))
    if kind == "index_add":  # x with twice its slices at the indices added (repeats add up)
        axis = int(numbers[0]) % x.dim()
        return torch.index_add(x, axis, indices.long(), 2 * torch.index_select(x, axis, indices.long()))
    if kind == "index_copy":  # x with twice its slices at the indices written (no repeats)
        axis = int(numbers[0]) % x.dim()
        return torch.index_copy(x, axis, indices.long(), 2 * torch.index_select(x, axis, indices.long()))
    if kind in ("index_get", "index_put"):  # advanced indexing by the k index tensors indices[0], ...
        at = tuple(indices[a].long() for a in range(int(numbers[0])))
        if kind == "index_get":
            return x[at]
        return x.index_put(at, 2 * x[at], accumulate=bool(numbers[1]))
    if kind == "segment_sum":  # jax.ops.segment_sum: rows of x added into row id of zeros
        rows = torch.zeros((int(numbers[0]),) + tuple(x.shape[1:]), dtype=x.dtype)
        return rows.index_add(0, indices.long(), x)
    if kind == "segment_max":  # jax.ops.segment_max: rows of x folded by max into row id of -inf
        rows = torch.full((int(numbers[0]),) + tuple(x.shape[1:]), float("-inf"), dtype=x.dtype)
        at = indices.long().reshape((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
        return rows.scatter_reduce(0, at, x, "amax")
    if kind == "scatter_set":  # torch.scatter of twice the gathered values (indices without repeats)
        axis = int(numbers[0]) % x.dim()
        return torch.scatter(x, axis, indices.long(), 2 * torch.gather(x, axis, indices.long()))
    if kind == "scatter_amax":  # every update ties with x's element at its index, and repeats with each other
        axis = int(numbers[0]) % x.dim()
        return torch.scatter_reduce(x, axis, indices.long(), torch.gather(x, axis, indices.long()), "amax")
    if kind == "scatter_amin":  # updates of 1.5 x: below x's element where it is negative
        axis = int(numbers[0]) % x.dim()
        return torch.scatter_reduce(x, axis, indices.long(), 1.5 * torch.gather(x, axis, indices.long()), "amin")
    if kind == "smoothed":  # x: logits, the indices: labels
        return torch.nn.functional.cross_entropy(x, indices.long(), reduction="none",
                                                 label_smoothing=float(arg))
    if kind == "upsample":
        return torch.nn.functional.interpolate(x, scale_factor=tuple(int(v) for v in numbers), mode="nearest")
    if kind == "clamp":
        return torch.clamp(x, numbers[0], numbers[1])
    if kind == "cumsum":
        return torch.cumsum(x, int(numbers[0]))
    if kind == "sort":  # ARG: axis,descending
        return torch.sort(x, dim=int(numbers[0]), descending=bool(numbers[1]), stable=True).values
    if kind == "topk":  # ARG: k, along the last axis
        return torch.topk(x, int(numbers[0])).values
    # Index results on ties (x * 4 truncated), as f64, plus 0 * x so that they have a (zero) gradient.
    tied = torch.trunc(x.detach() * 4)
    if kind == "argsort_ties":  # ARG: axis
        return torch.argsort(tied, dim=int(numbers[0]), stable=True).double() + 0 * x
    if kind == "topk_indices":  # ARG: k; lower indices first on ties, as jax.lax.top_k (torch.topk's order is unspecified)
        k = int(numbers[0])
        return torch.sort(tied, dim=-1, descending=True, stable=True).indices[..., :k].double() + 0 * x[..., :k]
    raise SystemExit("torch_composed.py: unknown kind " + kind)


def main():
    directory, specs = sys.argv[1], sys.argv[2:]
    arrays = read(directory)
    for at in range(0, len(specs), 3):
        name, kind, arg = specs[at:at + 3]
        x = arrays["x." + name].clone().requires_grad_()
        y = apply(kind, arg, x, arrays.get("i." + name))
        (y * arrays["g." + name]).sum().backward()
        write(directory, "y." + name, y)
        write(directory, "dx." + name, x.grad)


if __name__ == "__main__":
    main()
