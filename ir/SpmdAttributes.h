// The discardable attributes of the `spmd` dialect, named once: the frontend sets them while
// tracing, the verifiers and passes read them, lowering copies the axis into the Program.
#pragma once

namespace spmd::ir {

// On the traced function: the pmap axis it is mapped over and that axis' size (P x K replicas).
inline constexpr const char* kAxisNameAttr = "spmd.axis_name";
inline constexpr const char* kAxisSizeAttr = "spmd.axis_size";
// On the traced function, with gradient accumulation (PmapOptions::accumulate > 1): each device
// runs this many of the axis' replicas one after another (replica d * micro_batches + step). The
// parameters' slices (spmd-shard-update) are cut over the devices, axis_size / micro_batches, and
// the all_gathers and reduce_scatters that move them span those.
inline constexpr const char* kMicroBatchesAttr = "spmd.micro_batches";
// On arguments and results: the value is mapped over the axis (absent: replicated).
inline constexpr const char* kMappedAttr = "spmd.mapped";
// On arguments and results that spmd-shard-update (ZeRO-1) made this replica's flat slice: the
// full tensor type (the slices of every replica, in order, padded with zeros, hold its elements).
inline constexpr const char* kShardOfAttr = "spmd.shard_of";
// On arguments: the caller donates the argument (PmapOptions::donateArguments, jax's
// donate_argnums); lowering pairs it with an output that may take its buffers.
inline constexpr const char* kDonatedAttr = "spmd.donated";
// On results: the name an error message uses for the output ("0.fc.weight").
inline constexpr const char* kNameAttr = "spmd.name";
// Set by the replication analysis (passes/Replication.h) on every op with a varying result.
inline constexpr const char* kVaryingAttr = "spmd.varying";
// On a function spmd::shardMap traced: its mesh's axis names (an array of strings, row-major:
// the last varies fastest over the mapped axis' replicas) and their sizes (i64 array).
inline constexpr const char* kMeshAxesAttr = "spmd.mesh_axes";
inline constexpr const char* kMeshShapeAttr = "spmd.mesh_shape";
// On an argument or result of such a function: it lies on the mesh by this PartitionSpec (an
// array of strings, per leading dimension the mesh axis splitting it, "" whole); the caller
// passes and receives the whole value, each replica holds its block (runtime::Placement::Mesh).
inline constexpr const char* kMeshSpecAttr = "spmd.mesh_spec";
// Per-axis replication on a mesh (passes/MeshVariation.h), an array of mesh axis names. Set by
// the frontend, and taken as given by the analysis: on an argument, the axes its spec splits it
// over; on the op of a collective over a mesh axis (composed of several ops), the axes its
// result varies over.
inline constexpr const char* kMeshVariesAttr = "spmd.mesh_varies";
// Set by the analysis on every other op of a mesh function whose results vary over some mesh
// axes: those axes (dumps show where values vary, axis by axis).
inline constexpr const char* kVariesOverAttr = "spmd.varies_over";
// The prefix every attribute above shares; lowering leaves such analysis marks out of steps.
// On a forward op traced inside spmd::checkpoint (jax.checkpoint): the segment it belongs to (an
// integer, one per checkpoint call). spmd-autodiff recomputes the segment from its inputs in the
// backward pass instead of keeping its values alive from the forward pass.
inline constexpr const char* kRematAttr = "spmd.remat";
// On the recomputed copy of a checkpointed op (spmd-autodiff), so that CSE does not merge it
// back into the forward op it copies.
inline constexpr const char* kRecomputedAttr = "spmd.recomputed";
// While spmd-autodiff differentiates a body: on each op inlined from a custom_vjp's forward
// region, that custom_vjp's number (its backward stands in for these ops' VJP rules).
inline constexpr const char* kCustomForwardAttr = "spmd.custom_forward";
inline constexpr const char* kAttrPrefix = "spmd.";

}  // namespace spmd::ir
