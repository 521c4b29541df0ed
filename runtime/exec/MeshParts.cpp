// Blocks of a value on a named mesh, cut from the whole and put together (runtime/exec/MeshParts.h).
#include "runtime/exec/MeshParts.h"

#include <cstring>
#include <set>

#include "runtime/base/Error.h"

namespace spmd::runtime {
namespace {

// The size of the mesh axis splitting dimension d (1 where the spec leaves it whole).
int64_t partsAlong(const MeshShape& mesh, const MeshSpec& spec, size_t d) {
  return d < spec.size() && !spec[d].empty() ? mesh.sizes[size_t(mesh.index(spec[d]))] : 1;
}

// Where replica r's block starts in the whole value.
Shape offsetOf(const MeshShape& mesh, const MeshSpec& spec, const Shape& part, int64_t r) {
  Shape offset(part.size(), 0);
  for (size_t d = 0; d < spec.size() && d < part.size(); ++d)
    if (!spec[d].empty()) offset[d] = mesh.coordinate(r, mesh.index(spec[d])) * part[d];
  return offset;
}

// Copies the box of `local` shape at `offset` in `whole` to or from `part`: row by row along the
// last dimension (toPart: whole -> part).
void copyBox(const Array& whole, const Shape& offset, std::byte* part, const Shape& local, bool toPart) {
  const size_t e = dtypeSize(whole.dtype), rank = local.size();
  if (numElements(local) == 0) return;
  const Shape strides = rowMajorStrides(whole.shape);
  const int64_t row = rank ? local[rank - 1] : 1;
  std::vector<int64_t> index(rank, 0);
  const int64_t rows = numElements(local) / row;
  auto* base = const_cast<std::byte*>(whole.data());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (size_t k = 0; k < rank; ++k) at += (index[k] + offset[k]) * strides[k];
    std::byte* w = base + size_t(at) * e;
    std::byte* p = part + size_t(r * row) * e;
    if (toPart) std::memcpy(p, w, size_t(row) * e);
    else std::memcpy(w, p, size_t(row) * e);
    for (int64_t k = int64_t(rank) - 2; k >= 0; --k) {
      if (++index[size_t(k)] < local[size_t(k)]) break;
      index[size_t(k)] = 0;
    }
  }
}

}  // namespace

Shape meshPartShape(const Shape& whole, DType dtype, const MeshShape& mesh, const MeshSpec& spec, const std::string& what) {
  const std::string at = what + " " + std::string(dtypeName(dtype)) + shapeString(whole) + " with spec " + specString(spec) +
                         " on mesh " + mesh.describe() + ": ";
  if (spec.size() > whole.size())
    throw Error(at + "the spec names " + std::to_string(spec.size()) + " dimensions but the value has " +
                std::to_string(whole.size()) + "; give at most one entry per dimension");
  Shape part = whole;
  for (size_t d = 0; d < spec.size(); ++d) {
    if (spec[d].empty()) continue;
    if (mesh.index(spec[d]) < 0) throw Error(at + "mesh " + mesh.describe() + " has no axis '" + spec[d] + "'");
    const int64_t s = partsAlong(mesh, spec, d);
    if (whole[d] % s != 0)
      throw Error(at + "dimension " + std::to_string(d) + " (" + std::to_string(whole[d]) + ") does not split into " +
                  std::to_string(s) + " equal parts over axis '" + spec[d] + "'; make it a multiple of " +
                  std::to_string(s));
    part[d] /= s;
  }
  return part;
}

Shape meshWholeShape(const Shape& part, const MeshShape& mesh, const MeshSpec& spec) {
  Shape whole = part;
  for (size_t d = 0; d < whole.size(); ++d) whole[d] *= partsAlong(mesh, spec, d);
  return whole;
}

void copyMeshPart(const Array& whole, const MeshShape& mesh, const MeshSpec& spec, int64_t replica, std::byte* part) {
  const Shape local = meshPartShape(whole.shape, whole.dtype, mesh, spec, "a mesh value");
  copyBox(whole, offsetOf(mesh, spec, local, replica), part, local, true);
}

Array assembleMeshParts(const std::byte* parts, DType dtype, const Shape& part, const MeshShape& mesh,
                        const MeshSpec& spec, const std::string& what) {
  Array out = Array::zeros(dtype, meshWholeShape(part, mesh, spec));
  const size_t partBytes = size_t(numElements(part)) * dtypeSize(dtype);
  const std::set<std::string> split(spec.begin(), spec.end());
  for (int64_t r = 0; r < mesh.replicas(); ++r) {
    int64_t owner = r;
    for (int a = 0; a < int(mesh.names.size()); ++a)
      if (!split.count(mesh.names[size_t(a)])) owner -= mesh.coordinate(r, a) * mesh.stride(a);
    const std::byte* mine = parts + size_t(r) * partBytes;
    if (owner == r) {
      copyBox(out, offsetOf(mesh, spec, part, r), const_cast<std::byte*>(mine), part, false);
      continue;
    }
    if (std::memcmp(mine, parts + size_t(owner) * partBytes, partBytes) != 0) {
      std::string axes;
      for (int a = 0; a < int(mesh.names.size()); ++a)
        if (!split.count(mesh.names[size_t(a)]) && mesh.coordinate(r, a) != 0)
          axes += (axes.empty() ? "'" : ", '") + mesh.names[size_t(a)] + "'";
      throw Error(what + " " + std::string(dtypeName(dtype)) + shapeString(part) + " (per replica) is whole over mesh axis " + axes +
                  " by its spec " + specString(spec) + ", but replicas " + std::to_string(owner) + " and " +
                  std::to_string(r) + " of mesh " + mesh.describe() + " hold different values; reduce it over that "
                  "axis (psum, pmean) before returning it, or split a dimension over the axis in outSpecs");
    }
  }
  return out;
}

}  // namespace spmd::runtime
