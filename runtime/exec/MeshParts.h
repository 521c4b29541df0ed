// A value on a named mesh (Placement::Kind::Mesh, spmd::shardMap's arguments and results): the
// block of the whole value each replica holds by its mesh coordinates and the spec, cut from the
// whole on the host, and the whole put together from every replica's block.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/base/Array.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

using MeshSpec = std::vector<std::string>;

// One replica's block of a whole value of shape `whole`: each dimension the spec splits over an
// axis of size S divided by S. Throws, naming `what` and its type, when the spec names more
// dimensions than the value has or a dimension does not split into equal parts.
Shape meshPartShape(const Shape& whole, DType dtype, const MeshShape& mesh, const MeshSpec& spec, const std::string& what);
// The whole value's shape from one replica's block.
Shape meshWholeShape(const Shape& part, const MeshShape& mesh, const MeshSpec& spec);
// Replica `replica`'s block of `whole` (row-major, into `part`, which holds the block's bytes).
void copyMeshPart(const Array& whole, const MeshShape& mesh, const MeshSpec& spec, int64_t replica, std::byte* part);
// The whole value from every replica's block (`parts`: the mesh's replicas in order, each the
// block's bytes of shape `part`). Each block is taken from the replica at coordinate 0 of every
// axis the spec does not name; a replica that differs from it only there must hold the same
// bits, else an error naming `what`, the axis and the two replicas.
Array assembleMeshParts(const std::byte* parts, DType dtype, const Shape& part, const MeshShape& mesh,
                        const MeshSpec& spec, const std::string& what);

}  // namespace spmd::runtime
