// The backend-neutral Program the compiler hands the runtime: buffers with dtypes and shapes,
// and an ordered list of steps (kernel calls by op name, with attributes) over those buffers.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/Shape.h"

namespace spmd::runtime {

using Attr = std::variant<bool, int64_t, double, std::vector<int64_t>, std::string>;
struct OpRecord;  // runtime/program/OpAttrs.h

struct BufferDesc {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> constant = {};  // initial contents for constants; empty otherwise
  // Byte offset in the replica's arena (compiler/PlanMemory); -1: the buffer is not planned
  // (inputs and constants, or a program lowered without a plan) and gets its own allocation.
  int64_t offset = -1;
  // Memory layout (runtime/program/Layouts.h): "" plain row-major; "nChw8c" etc. where the
  // compiler's spmd-assign-layouts pass chose the backend's blocked layout. Same bytes either way.
  std::string layout = {};

  size_t bytes() const { return static_cast<size_t>(numElements(shape)) * dtypeSize(dtype); }
};

struct Step {
  std::string op;                      // dialect op name without prefix: "conv2d"
  std::vector<int> inputs, outputs;    // buffer ids
  std::map<std::string, Attr> attrs;
  std::string location;                // user's "file:line", for errors
  std::string layer = {};              // the nn layer path ("stage2.0.conv1"); empty outside layers
  // `attrs` decoded into the op's typed record (runtime/program/OpAttrs.h: decodeAttributes,
  // which the executor runs on each step; kernels read it with attrsOf<Record>).
  std::shared_ptr<const OpRecord> record = {};

  // "stage2.0.conv1, main.cpp:66" (or just the location): where the step came from.
  std::string where() const;

  const Attr& attr(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool flag(const std::string& name) const;  // false when absent
  const std::string& text(const std::string& name) const;
};

// Whether a step of this op moves data between replicas through the communicator (axis_index
// only reads the replica's index).
inline bool exchangesBetweenReplicas(const std::string& op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" || op == "ppermute" || op == "all_to_all";
}

// A `fused` step that compiler/BatchFused made of k steps has the `segments` attribute k (1 for
// every other step); segment s's operands are inputs [s * ni, (s + 1) * ni) and outputs
// [s * no, (s + 1) * no) (runtime/device/Segments.h runs them).
inline int64_t segmentsOf(const Step& step) { return step.attrs.count("segments") ? step.integer("segments") : 1; }

// The named device mesh a shardMap-ped program runs over (spmd.mesh_axes, spmd.mesh_shape): the
// replicas of the program's axis as a row-major grid, the last axis varying fastest (over
// {data: 2, model: 2}, replica r sits at data = r / 2, model = r % 2). Empty for other programs.
struct MeshShape {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;

  bool empty() const { return names.empty(); }
  int64_t replicas() const;                  // the product of the sizes; -1 where one is < 1 or it overflows
  int index(const std::string& axis) const;  // -1 when the mesh has no such axis
  int64_t stride(int axis) const;            // replicas between neighbours along axis `axis`
  int64_t coordinate(int64_t replica, int axis) const { return replica / stride(axis) % sizes[size_t(axis)]; }
  std::string describe() const;              // "{data: 2, model: 2}"
  bool operator==(const MeshShape&) const = default;
};

// How one input or output of a replica stands to the value the caller passes or receives (the
// call contract, as JAX's in/out shardings under pmap): the same value on every replica; the
// replica's part of a value mapped over the axis (its leading dimension, split or stacked across
// the replicas); ZeRO-1's flat slice of a tensor of shape `full`, whose elements are cut into
// `replicas` equal slices (the last padded with zeros); or, on a mesh, the block of the whole
// value that the replica's mesh coordinates select by `spec` (jax's PartitionSpec: per leading
// dimension the mesh axis that splits it into equal consecutive parts, "" whole; the replicas
// that differ only in the coordinates of axes the spec does not name hold the same block).
struct Placement {
  enum class Kind { Replicated, Mapped, Sliced, Mesh };
  Kind kind = Kind::Replicated;
  Shape full = {};                     // Sliced: the whole tensor's shape; else empty
  std::vector<std::string> spec = {};  // Mesh: per dimension, the axis splitting it ("" whole)

  bool operator==(const Placement&) const = default;
};

// "replicated", "mapped", "sliced", "mesh": the kind's word in text, files and errors.
const char* placementName(Placement::Kind kind);
// {"", "model"}: a Mesh placement's spec as messages and the program text show it.
std::string specString(const std::vector<std::string>& spec);

struct Program {
  std::string name;
  // The pmap axis the program was compiled for (spmd.axis_name) and its size: the replica count
  // its collectives and pmean divisors assume. A program without an axis (jit) has no
  // collectives; its replicas = 1 and any device count runs independent copies.
  std::string axisName;
  int64_t replicas = 1;
  // Gradient accumulation (spmd.micro_batches): each device runs this many of the replicas one
  // after another. Sliced values, and the all_gathers and reduce_scatters that move them, span
  // the devices: deviceReplicas() of them.
  int64_t microBatches = 1;
  int64_t deviceReplicas() const { return replicas / microBatches; }
  std::vector<BufferDesc> buffers;
  std::vector<int> inputs, outputs;  // buffer ids, in the function's argument/result order
  // The call contract, one entry per input and per output (empty in the parts of an accumulated
  // step, compiler/SplitAccumulation, which its micro-batch loop runs, not a caller).
  std::vector<Placement> inputPlacements, outputPlacements;
  // The mesh that Mesh placements refer to (empty when none does).
  MeshShape mesh;
  // Per output: the input whose buffers it takes when the caller donates that input and passes
  // it on these devices (jax's donate_argnums, input_output_aliases), or -1. The lowering pairs
  // each donated input, in order, with the first free output of its dtype, shape and placement
  // that is not an input passed through.
  std::vector<int> outputDonors;
  std::vector<Step> steps;
  // Size of the one arena holding every planned buffer; 0 when nothing is planned.
  size_t arenaBytes = 0;

  // Human-readable text form, one line per buffer and step.
  std::string toText() const;
  // Whether any step moves data between replicas (exchangesBetweenReplicas).
  bool exchanges() const {
    for (const Step& step : steps)
      if (exchangesBetweenReplicas(step.op)) return true;
    return false;
  }
};

}  // namespace spmd::runtime
