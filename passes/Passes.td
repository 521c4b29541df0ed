// Every pass of the spmd pipeline, one def each; each is implemented in passes/<Name>.cpp and
// runs by itself in spmd-opt (`spmd-opt in.mlir --spmd-autodiff`).
#ifndef SPMD_PASSES_TD
#define SPMD_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"spmd-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode autodiff: expand spmd.value_and_grad into forward and VJP ops";
  let description = [{
    Replaces each `spmd.value_and_grad` with its body's ops followed by the backward sweep:
    walking the body in reverse, every op that depends on a differentiated argument and feeds
    the loss contributes its VJP (the op's VjpOpInterface rule); cotangents reaching a value
    along several uses are summed. Inner value_and_grad ops expand first. An op on the path
    with no VJP rule is an error at its source location.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def Replication : Pass<"spmd-replication", "mlir::ModuleOp"> {
  let summary = "replication analysis: mark every op whose result varies across the mapped axis";
  let description = [{
    In functions mapped over an axis (func attribute `spmd.axis_name`, set by spmd::pmap), puts
    `spmd.varying` on each op with a result that differs between replicas; unmarked ops are
    invariant. Arguments and results with `spmd.mapped` are mapped, the rest replicated.
    Mapped arguments vary; all_reduce and all_gather make values invariant again. In a function
    spmd::shardMap traced over a mesh (`spmd.mesh_axes`), also puts `spmd.varies_over` (the mesh
    axes a result varies over, passes/MeshVariation.h) on each op whose results vary.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def InsertPmean : Pass<"spmd-insert-pmean", "mlir::ModuleOp"> {
  let summary = "keep replicated outputs replicated: insert pmean where a varying value reaches one";
  let description = [{
    Runs before autodiff. For each replicated result of a mapped function that varies across
    the axis: where it depends on the gradient of a replicated parameter (a value_and_grad
    result for an invariant primal), a mean all_reduce is inserted on that gradient, so the
    optimizer (any optimizer) sees averaged gradients; a scalar (the loss, a metric) or a new value
    of a replicated input (computed from an unmapped argument of its type: BatchNorm running
    statistics) that still varies gets a mean all_reduce just before the return. Any other varying
    output (logits, per-example losses) is an error naming it and its line: return it mapped
    (out_axes) or average it explicitly. Outputs the user made invariant (by writing pmean/psum)
    get nothing. With `strict`, every insertion is instead an
    error naming the output and the source line of the value.
  }];
  let options = [
    Option<"strict", "strict", "bool", "false",
           "report each needed pmean as an error instead of inserting it">
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def CombineAllReduce : Pass<"spmd-combine-all-reduce", "mlir::ModuleOp"> {
  let summary = "combine the all_reduces of a step into a few flat-buffer all_reduces";
  let description = [{
    Groups single all_reduce ops of one axis, reduction and element type, in the order their
    operands are produced, into buckets of at most `bucket-bytes`; each bucket becomes one
    all_reduce with many operands (one flat buffer at run time), placed right after its last
    operand is computed. The order is fixed at compile time, the same on every replica. An op
    joins a bucket only if no user of the bucket would then run before it.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "25 << 20",
           "largest combined all_reduce, in bytes (a single larger tensor gets its own)">
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def ShardUpdate : Pass<"spmd-shard-update", "mlir::ModuleOp"> {
  let summary = "ZeRO-1: each replica runs the optimizer update on its 1/N slice of every tensor";
  let description = [{
    Runs after autodiff (PmapOptions::shardUpdate). The update region is every invariant
    elementwise op reached from an averaged gradient (a mean or sum all_reduce of a varying
    tensor) through ops of its type, plus the invariant elementwise ops of that type feeding it.
    Each region op is cloned onto tensor<chunk> (chunk = ceil(numel / N); replica r holds flat
    elements [r * chunk, (r + 1) * chunk), the last slices padded with zeros): the gradient's
    all_reduce becomes a reduce_scatter (divided by N for a mean, as the all_reduce divides
    its fold's root), replicated arguments the region reads become the replica's slice
    (spmd.mapped, spmd.shard_of = the full type) with an all_gather where the rest of the step
    reads them, splat constants and broadcast scalars are rebuilt at the slice's shape, other
    invariant operands are sliced at axis_index, and returned region values are returned as
    slices. The fold of every element and every update op are the same, so the results are
    bitwise the replicated update's.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def MarkRemat : Pass<"spmd-mark-remat", "mlir::ModuleOp"> {
  let summary = "mark the layers whose recomputation frees the most memory as checkpoint segments";
  let description = [{
    Runs before autodiff when the pipeline fits a memory budget (PmapOptions::memoryBudget).
    Candidates are runs of consecutive forward ops in a value_and_grad body that share their nn
    layer path up to `depth` components ("stage2.0": a residual block), scored by the bytes of
    the values they define before their last op. The `segments` best are marked spmd.remat, as
    spmd::checkpoint marks ops, for spmd-autodiff to recompute; the choice is recorded on each
    function as spmd.remat_chosen (the layers, largest first).
  }];
  let options = [
    Option<"segments", "segments", "int64_t", "-1", "how many candidates to mark (-1: all)">,
    Option<"depth", "depth", "int", "2", "components of the layer path that make one segment">,
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def GatherAtUse : Pass<"spmd-gather-at-use", "mlir::ModuleOp"> {
  let summary = "FSDP: gather each sliced parameter right before each op that reads it";
  let description = [{
    Runs after spmd-shard-update (PmapOptions::fullyShard). Every all_gather of a sliced
    function argument (spmd.shard_of), with the reshape/slice chain that rebuilds the full
    tensor, is cloned right before each op that reads the full tensor (one gather per reader,
    in the forward and again in the backward pass), and the gather at the top of the step is
    erased. The memory plan then keeps a layer's full parameters alive only while its op runs;
    between layers and steps each replica holds its 1/N slice. Gathers copy bits, so the step's
    results are unchanged.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def CombineShardedCollectives : Pass<"spmd-combine-sharded-collectives", "mlir::ModuleOp"> {
  let summary = "ZeRO-1's and FSDP's per-tensor reduce_scatters and all_gathers in buckets";
  let description = [{
    Runs after spmd-shard-update and spmd-gather-at-use. Reduce_scatters of [N, c] rows of one
    axis, reduction, element type and N are grouped in the order their operands are produced
    into buckets of at most `bucket-bytes`: each bucket is one reduce_scatter of the rows
    concatenated along axis 1, placed right after its last operand, sliced back per member; an
    op joins a bucket only if none of the bucket's results would then be used before it.
    All_gathers of sliced function arguments that follow one another (the reshapes and slices
    rebuilding their tensors in between) become one all_gather of the slices concatenated, where
    the first of them was, sliced back per member; with `prefetch`, each run's gathers move up to
    where the run before it starts rebuilding (one layer ahead). The same bits: every element is
    folded or copied as before.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "4 << 20",
           "largest combined collective, in bytes (a single larger tensor gets its own)">,
    Option<"prefetch", "prefetch", "bool", "false",
           "issue each run of gathers one run earlier, where the previous one's rebuilding starts (FSDP "
           "prefetching one layer ahead)">
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def FuseElementwise : Pass<"spmd-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "group chains of elementwise ops into spmd.fused ops (one generated kernel each)";
  let description = [{
    Runs after autodiff. Walking each function in order, an elementwise op joins the fusion
    group of an operand's producer when they share the iteration space (result type), so chains
    such as residual add + relu, relu_backward + add, or an optimizer's update of one parameter
    become one group. broadcast_in_dim and splat constants join the group of their consumer and
    become index maps and literals in the body. A group takes an op only if no op outside the
    group that uses a group value comes before it, so the fused op (placed at the group's last
    op) never moves a use before its definition. Groups of two or more ops become one spmd.fused
    op whose results are the group values used outside it.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def FuseRelu : Pass<"spmd-fuse-relu", "mlir::ModuleOp"> {
  let summary = "fold a relu into the batch_norm_train or conv2d whose result only it reads";
  let description = [{
    Runs after autodiff, before spmd-fuse-elementwise. A `spmd.relu` whose operand is the
    normalized result of a `spmd.batch_norm_train`, or the result of a `spmd.conv2d`, with no
    other user becomes that op's `relu` attribute: the op writes max(0, y) itself (one pass over
    the activation instead of two; on cuda a convolution's bias and relu run in its cuDNN graph),
    and the relu's users read the op's result. The backward sweep is already built, and it reads
    the relu's result (relu_backward) and the producer's inputs, never the pre-relu result, so
    nothing else changes.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def AssignLayouts : Pass<"spmd-assign-layouts", "mlir::ModuleOp"> {
  let summary = "the backend's activation layout (blocked, channels-last) where its kernels take it";
  let description = [{
    Runs last, after fusion. Walking each function in order: a result an op's kernel writes in
    the backend's `layout` (conv2d, conv2d_backward_data: "nChw8c" / "nChw16c", oneDNN's blocked
    format tags on the CPU, or "nhwc", channels-last for cuDNN) gets it in its tensor type's encoding;
    batch norm's results follow its data input; elementwise ops and fused bodies that read every
    operand at the result's index run in the layout an operand arrives in. An operand in a layout
    its consumer's kernel does not read (runtime/program/Layouts.h lists the ports that read
    blocked), and every function result, gets an spmd.relayout to plain, one per value, before
    its first such user. Values are never blocked unless their channels fill whole blocks, so
    sizes (and the memory plan) do not change. An empty `layout` leaves the IR as it is.
  }];
  let options = [
    Option<"layout", "layout", "std::string", "\"\"",
           "the backend's activation layout: nChw8c (AVX2 oneDNN), nChw16c (AVX-512), nhwc (cuDNN), empty (plain only)">
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

def WidenBf16 : Pass<"spmd-widen-bf16", "mlir::ModuleOp"> {
  let summary = "bf16 ops compute in f32 between bf16 roundings";
  let description = [{
    Every op with a bf16 operand or result (but convert) is rebuilt on f32: each bf16 operand is
    widened by a convert right after its definition (exact, once per value), and each bf16
    result is rounded back to bf16 by a convert (to nearest, ties to even). bf16 literals become
    f32 literals. Kernels then meet bf16 only in convert (and the kept ops below), on every backend, and a bf16 op's
    result is its f32 result on the bf16 inputs, rounded once: bf16 storage, f32 arithmetic, as
    oneDNN's and cuDNN's bf16 kernels accumulate, without depending on the machine's ISA.
    With native-kernels, the ops with bf16 kernels (runtime/program/Bf16Kernels.h: convolutions
    and matmuls) whose float operands and results are all bf16 stay in bf16, for the backend's
    library to run (oneDNN on AVX512-BF16 or AMX, cuDNN and cuBLAS): the same roundings, the f32
    sums in the library's order.
  }];
  let options = [
    Option<"nativeKernels", "native-kernels", "bool", "false",
           "keep convolutions and matmuls on bf16 operands for the backend's bf16 kernels">
  ];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

#endif
