// Every op of the `spmd` dialect, one def each. Shape rules (inferReturnTypes) and verifiers are
// in SpmdShapeRules.cpp; kernels are in runtime/cpu and runtime/reference under the same name.
#ifndef SPMD_OPS_TD
#define SPMD_OPS_TD

include "ir/SpmdDialect.td"
include "ir/SpmdEnums.td"
include "ir/SpmdInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Differentiable ops implement the VJP interface; the rule is XOp::buildVjp in SpmdVjpRules.cpp.
defvar Vjp = DeclareOpInterfaceMethods<Spmd_VjpOpInterface>;

class Spmd_Op<string mnemonic, list<Trait> traits = []>
    : Op<Spmd_Dialect, mnemonic, !listconcat([Pure], traits)> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// An op whose result types follow from operands and attributes. Shape rules infer plain types;
// after spmd-assign-layouts a result may carry a layout (ir/Layout.h), which they accept.
def Spmd_InferTypeUpToLayout : InferTypeOpAdaptorBase<[{
  static bool isCompatibleReturnTypes(::mlir::TypeRange l, ::mlir::TypeRange r) {
    return ::spmd::ir::sameUpToLayout(l, r);
  }
}]>;
class Spmd_InferredOp<string mnemonic, list<Trait> traits = []>
    : Spmd_Op<mnemonic, !listconcat([Spmd_InferTypeUpToLayout], traits)>;

//===--- constants ---------------------------------------------------------------------------===//

def Spmd_ConstantOp : Spmd_InferredOp<"constant", [ConstantLike, Spmd_ZeroGradient]> {
  let summary = "a tensor literal";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Spmd_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===--- convolution and normalization -------------------------------------------------------===//

def Spmd_Conv2dOp : Spmd_InferredOp<"conv2d", [Vjp]> {
  let summary = "2-D convolution, NCHW input, OIHW filter, optional per-channel bias";
  let description = [{
    With `relu`, the result is max(0, convolution + bias): made by spmd-fuse-relu after autodiff
    (the op has no VJP in that form). `dilation` spaces the filter's taps (torch.nn.Conv2d's
    dilation; absent: 1, 1). With `groups` = G (absent: 1) the channels split into G groups: the
    filter is [O, C / G, KH, KW] and output channel o reads input channels of group o / (O / G)
    alone (G = C: depthwise).
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_FloatTensor:$filter,
                       Optional<Spmd_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$relu,
                       OptionalAttr<DenseI64ArrayAttr>:$dilation, OptionalAttr<I64Attr>:$groups);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_BatchNormTrainOp : Spmd_InferredOp<"batch_norm_train", [Vjp]> {
  let summary = "batch normalization over N, H, W with batch statistics";
  let description = [{
    Normalizes each channel of an NCHW input with the batch's mean and biased variance, then
    scales and shifts. Also returns the batch mean and the biased batch variance per channel.
    With `relu`, the result is max(0, normalized): made by spmd-fuse-relu after autodiff
    (the op has no VJP in that form).
    With `mask` ([N]: 1 for an example, 0 for a padding row), the statistics weight row n by
    mask[n]: mean = sum(w x) / W and variance = sum(w (x - mean)^2) / W over W = sum(w) * H * W
    values, so padded rows change nothing; every row is still normalized. No weight at all
    (W = 0, a replica holding only padding) gives mean 0 and variance 1, so the rows pass
    through as scale * x / sqrt(1 + epsilon) + offset and stay finite.
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_FloatTensor:$scale,
                       Spmd_FloatTensor:$offset, Optional<Spmd_FloatTensor>:$mask,
                       F64Attr:$epsilon, DefaultValuedAttr<BoolAttr, "false">:$relu);
  let results = (outs Spmd_FloatTensor:$result, Spmd_FloatTensor:$batch_mean,
                      Spmd_FloatTensor:$batch_variance);
}

def Spmd_BatchNormInferOp : Spmd_InferredOp<"batch_norm_infer", [Vjp]> {
  let summary = "batch normalization with given (running) mean and variance";
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_FloatTensor:$scale,
                       Spmd_FloatTensor:$offset, Spmd_FloatTensor:$mean,
                       Spmd_FloatTensor:$variance, F64Attr:$epsilon);
  let results = (outs Spmd_FloatTensor:$result);
}

//===--- pooling and normalizing along an axis -----------------------------------------------===//

// The windowed reductions every pooling op is (XLA's and JAX's reduce_window over the spatial
// dims of an NCHW input), one op with one VJP rule, one reference and one library kernel.
def Spmd_ReduceWindowOp : Spmd_InferredOp<"reduce_window", [Vjp]> {
  let summary = "reduce each window of the last two dims (max, sum or mean): every pooling op";
  let description = [{
    Windows of an NCHW input: window [KH, KW] of taps dilation [DH, DW] apart, stride [SH, SW],
    symmetric padding [PH, PW] with 0 <= padding < the dilated window DH (KH - 1) + 1; the output
    is [N, C, (H + 2 PH - DH (KH - 1) - 1) / SH + 1, (W + ...) / SW + 1], as torch.nn.MaxPool2d,
    and every window must hold at least one input element. max: the largest element (padding
    never wins; a NaN in the window wins); sum: the window's sum; mean: the sum over the full
    window size with padding counted as zeros when count_include_pad (PyTorch's and
    flax.linen.avg_pool's default), else over the input elements the window holds. max_pool2d
    and avg_pool2d of the DSL are this op.
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_ReductionAttr:$reduction,
                       DenseI64ArrayAttr:$window, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilation,
                       BoolAttr:$count_include_pad);
  let results = (outs Spmd_FloatTensor:$result);
}

// Along one axis, computed per slice with the slice's maximum subtracted first.
class Spmd_AxisNormalizeOp<string mnemonic, string what>
    : Spmd_InferredOp<mnemonic, [Vjp]> {
  let summary = what;
  let arguments = (ins Spmd_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_SoftmaxOp : Spmd_AxisNormalizeOp<"softmax", "exp(x) / sum(exp(x)) along axis">;
def Spmd_LogSoftmaxOp
    : Spmd_AxisNormalizeOp<"log_softmax", "x - log(sum(exp(x))) along axis">;

//===--- embedding ---------------------------------------------------------------------------===//

def Spmd_EmbeddingOp : Spmd_InferredOp<"embedding", [Vjp]> {
  let summary = "rows of a [V, D] table at i32 ids of any shape: result [ids..., D]";
  let description = [{
    An id outside [0, V) is an error reported at run time with its position (never a silent
    read out of bounds).
  }];
  let arguments = (ins Spmd_FloatTensor:$table, Spmd_IndexTensor:$ids);
  let results = (outs Spmd_FloatTensor:$result);
}

//===--- take_along_axis ---------------------------------------------------------------------===//

def Spmd_TakeAlongAxisOp : Spmd_InferredOp<"take_along_axis", [Vjp]> {
  let summary = "input's elements at i32 indices along one axis (numpy.take_along_axis, torch.gather)";
  let description = [{
    indices has input's rank and input's sizes on every other axis; its size along `axis` is
    the result's: result[..., i, ...] = input[..., indices[..., i, ...], ...] along `axis`. An
    index outside [0, input's size along axis) is an error reported at run time with its
    position (never a silent read out of bounds).
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_ScatterOp : Spmd_InferredOp<"scatter", [Vjp]> {
  let summary = "input with updates written where their i32 indices point along one axis (torch.scatter)";
  let description = [{
    indices and updates have one shape, of input's rank and input's sizes on every other axis:
    result[..., indices[..., j, ...], ...] = updates[..., j, ...] along `axis`, every other element
    input's. Where indices repeat, the last update in index order is written (jax's .at[].set
    leaves it unspecified, torch.scatter too): the result does not depend on thread timing. The
    gradient reaches input where no update was written and the update that was written, no other.
    An index outside [0, input's size along axis) is an error reported at run time with its
    position.
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_IndexTensor:$indices, Spmd_FloatTensor:$updates, I64Attr:$axis);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_SegmentReduceOp : Spmd_Op<"segment_reduce", [Vjp]> {
  let summary = "rows of data folded by max or min into the result rows their i32 segment ids name";
  let description = [{
    data [N, W], segment_ids [N], result [S, W] (jax.ops.segment_max / segment_min): row s is the
    max (min) of data's rows whose id is s, -inf (+inf) where none is; a NaN makes it NaN. An id
    outside [0, S) is an error reported at run time with its position. The gradient is shared
    evenly among the rows equal to their segment's result, as scatter_reduce's. Segment sums are
    embedding_backward.
  }];
  let arguments = (ins Spmd_FloatTensor:$data, Spmd_IndexTensor:$segment_ids, Spmd_ReductionAttr:$reduction);
  let results = (outs Spmd_FloatTensor:$result);
  let hasVerifier = 1;
}

def Spmd_ScatterReduceOp : Spmd_InferredOp<"scatter_reduce", [Vjp]> {
  let summary = "input folded with the updates at their i32 indices along one axis by max or min";
  let description = [{
    torch.scatter_reduce(input, axis, indices, updates, "amax" / "amin") with include_self, jax's
    .at[].max / .min along one axis: each element the largest (smallest) of input's element and
    the updates whose index points at it; a NaN among them makes it NaN. The operands' shapes are
    scatter's. The gradient is shared evenly among the operands equal to the result (input's
    element and updates alike), as torch's. The sum is spmd::scatterAdd (take_along_axis_backward
    added to input), so `reduction` is max or min.
  }];
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_IndexTensor:$indices, Spmd_FloatTensor:$updates, I64Attr:$axis,
                       Spmd_ReductionAttr:$reduction);
  let results = (outs Spmd_FloatTensor:$result);
}

//===--- random numbers ----------------------------------------------------------------------===//

// A key is a tensor<2xi32> (jax.random's raw key): spmd::random::key(seed) makes one on the host.
def Spmd_RandomUniformOp : Spmd_Op<"random_uniform", [Spmd_ZeroGradient]> {
  let summary = "uniform floats in [0, 1) drawn from a key; the result type gives the shape";
  let description = [{
    Philox4x32-10 (runtime/base/Philox.h): element i (row-major) is a function of the key and i
    alone, so the values do not depend on the backend, the thread count or the device a replica
    runs on. One key gives one stream: derive a key per use with random_fold_in.
  }];
  let arguments = (ins Spmd_IndexTensor:$key);
  let results = (outs Spmd_FloatTensor:$result);
  let hasVerifier = 1;
}

def Spmd_RandomFoldInOp : Spmd_InferredOp<"random_fold_in", [Spmd_ZeroGradient]> {
  let summary = "the key derived from a key and a scalar i32 (a replica index, a step, a layer)";
  let arguments = (ins Spmd_IndexTensor:$key, Spmd_IndexTensor:$data);
  let results = (outs Spmd_IndexTensor:$result);
}

//===--- elementwise -------------------------------------------------------------------------===//

// Result type = operand type; ODS derives the shape rule from SameOperandsAndResultType.
class Spmd_BinaryOp<string mnemonic>
    : Spmd_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface, Vjp]> {
  let summary = "elementwise " # mnemonic # " of two tensors of one shape (broadcast explicitly)";
  let arguments = (ins Spmd_FloatTensor:$lhs, Spmd_FloatTensor:$rhs);
  let results = (outs Spmd_FloatTensor:$result);
  // Splat constants fold; x + 0, x - 0, x * 1 and x / 1 fold to x.
  let hasFolder = 1;
}

def Spmd_AddOp : Spmd_BinaryOp<"add">;
def Spmd_SubOp : Spmd_BinaryOp<"sub">;
def Spmd_MulOp : Spmd_BinaryOp<"mul">;
def Spmd_DivOp : Spmd_BinaryOp<"div">;
// a^b as C's pow (torch.pow, jnp.power): NaN for a negative base and a non-integer exponent.
def Spmd_PowOp : Spmd_BinaryOp<"pow">;
def Spmd_MaxOp : Spmd_BinaryOp<"max">;
def Spmd_MinOp : Spmd_BinaryOp<"min">;

class Spmd_UnaryOp<string mnemonic>
    : Spmd_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface, Vjp]> {
  let summary = "elementwise " # mnemonic;
  let arguments = (ins Spmd_FloatTensor:$input);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_NegOp : Spmd_UnaryOp<"neg">;
def Spmd_ExpOp : Spmd_UnaryOp<"exp">;
def Spmd_LogOp : Spmd_UnaryOp<"log">;
def Spmd_SqrtOp : Spmd_UnaryOp<"sqrt">;
def Spmd_ReluOp : Spmd_UnaryOp<"relu">;
def Spmd_TanhOp : Spmd_UnaryOp<"tanh">;
def Spmd_SigmoidOp : Spmd_UnaryOp<"sigmoid">;
def Spmd_AbsOp : Spmd_UnaryOp<"abs">;
def Spmd_GeluOp : Spmd_UnaryOp<"gelu">;  // exact: x * Phi(x), as torch.nn.functional.gelu
def Spmd_SinOp : Spmd_UnaryOp<"sin">;   // radians
def Spmd_CosOp : Spmd_UnaryOp<"cos">;
// log(1 + x) and e^x - 1, exact near 0 where log(1 + x) and exp(x) - 1 cancel (softplus, elu).
def Spmd_Log1pOp : Spmd_UnaryOp<"log1p">;
def Spmd_Expm1Op : Spmd_UnaryOp<"expm1">;
// The error function and its inverse (torch.erf / torch.erfinv, jax.lax.erf / erf_inv):
// erfinv(+-1) = +-inf, NaN outside [-1, 1].
def Spmd_ErfOp : Spmd_UnaryOp<"erf">;
def Spmd_ErfinvOp : Spmd_UnaryOp<"erfinv">;

// Steps (torch.floor / ceil / round / sign, jnp's): their gradient is zero, as torch's and jax's.
// round: to nearest, ties to even; sign: -1, 0 or 1, with NaN and the zero's sign kept.
class Spmd_StepOp<string mnemonic>
    : Spmd_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface, Spmd_ZeroGradient]> {
  let summary = "elementwise " # mnemonic # " (zero gradient)";
  let arguments = (ins Spmd_FloatTensor:$input);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_FloorOp : Spmd_StepOp<"floor">;
def Spmd_CeilOp : Spmd_StepOp<"ceil">;
def Spmd_RoundOp : Spmd_StepOp<"round">;
def Spmd_SignOp : Spmd_StepOp<"sign">;

def Spmd_StopGradientOp
    : Spmd_Op<"stop_gradient", [SameOperandsAndResultType, InferTypeOpInterface, Spmd_ZeroGradient]> {
  let summary = "the input, through which no gradient flows (jax.lax.stop_gradient, torch's detach)";
  let description = [{
    Autodiff sends no cotangent to its input; the canonicalizer after autodiff folds it to its
    input, so no Program holds it and no kernel runs for it.
  }];
  let arguments = (ins Spmd_FloatTensor:$input);
  let results = (outs Spmd_FloatTensor:$result);
  let hasFolder = 1;
}

// Comparisons: 1 where the relation holds, else 0, in the operands' float type (a mask to
// multiply by). A NaN operand compares false (not_equal: true), as IEEE, NumPy and PyTorch.
// The VJPs of max, min and reduce_max route cotangents with them.
class Spmd_CompareOp<string mnemonic, string relation>
    : Spmd_Op<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface, Spmd_ZeroGradient]> {
  let summary = "elementwise mask: 1.0 where lhs " # relation # " rhs, else 0.0";
  let arguments = (ins Spmd_FloatTensor:$lhs, Spmd_FloatTensor:$rhs);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_GreaterEqualOp : Spmd_CompareOp<"greater_equal", ">=">;
def Spmd_GreaterOp : Spmd_CompareOp<"greater", ">">;
def Spmd_LessEqualOp : Spmd_CompareOp<"less_equal", "<=">;
def Spmd_LessOp : Spmd_CompareOp<"less", "<">;
def Spmd_EqualOp : Spmd_CompareOp<"equal", "==">;
def Spmd_NotEqualOp : Spmd_CompareOp<"not_equal", "!=">;

//===--- shape -------------------------------------------------------------------------------===//

def Spmd_BroadcastInDimOp : Spmd_Op<"broadcast_in_dim", [Vjp]> {
  let summary = "broadcast to the result shape; operand dim i maps to result dim dims[i]";
  let arguments = (ins Spmd_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Spmd_AnyTensor:$result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Spmd_ConvertOp : Spmd_Op<"convert", [Vjp]> {
  let summary = "each element converted to the result's element type (f32, f64, bf16, i32), same shape";
  let description = [{
    Float to i32 rounds toward zero and saturates: NaN becomes 0, values beyond the i32 range
    become its bounds (C++ leaves these undefined; XLA and NumPy differ, so spmd fixes one).
    To bf16 rounds to nearest, ties to even (f64 through f32, as PyTorch does); this is also
    the rounding spmd-widen-bf16 puts after every op it widens.
    The gradient of a float-to-float conversion is converted back; integers have none.
  }];
  let arguments = (ins Spmd_AnyTensor:$input);
  let results = (outs Spmd_AnyTensor:$result);
  let hasVerifier = 1;
}

def Spmd_ReshapeOp : Spmd_Op<"reshape", [Vjp]> {
  let summary = "reinterpret a row-major tensor with another shape of the same element count";
  let arguments = (ins Spmd_AnyTensor:$input);
  let results = (outs Spmd_AnyTensor:$result);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Spmd_SliceOp : Spmd_InferredOp<"slice", [Vjp]> {
  let summary = "the box [start, limit) of each dim (stride 1): result dims limit - start";
  let arguments = (ins Spmd_AnyTensor:$input, DenseI64ArrayAttr:$start, DenseI64ArrayAttr:$limit);
  let results = (outs Spmd_AnyTensor:$result);
}

def Spmd_PadOp : Spmd_InferredOp<"pad", [Vjp]> {
  let summary = "zeros added before (low) and after (high) each dim: result dims low + dim + high";
  let arguments = (ins Spmd_AnyTensor:$input, DenseI64ArrayAttr:$low, DenseI64ArrayAttr:$high);
  let results = (outs Spmd_AnyTensor:$result);
}

def Spmd_ConcatenateOp : Spmd_InferredOp<"concatenate", [Vjp]> {
  let summary = "the inputs joined along axis (they agree on every other dim and the type)";
  let arguments = (ins Variadic<Spmd_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Spmd_AnyTensor:$result);
}

def Spmd_SelectOp
    : Spmd_Op<"select", [SameOperandsAndResultType, InferTypeOpInterface, Vjp]> {
  let summary = "on_true where condition is nonzero, else on_false (condition: a comparison's mask)";
  let arguments = (ins Spmd_FloatTensor:$condition, Spmd_FloatTensor:$on_true,
                       Spmd_FloatTensor:$on_false);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_TransposeOp : Spmd_InferredOp<"transpose", [Vjp]> {
  let summary = "permute dimensions: result dim i is input dim perm[i]";
  let arguments = (ins Spmd_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Spmd_AnyTensor:$result);
  let hasFolder = 1;
}

//===--- reductions --------------------------------------------------------------------------===//

class Spmd_ReduceOp<string mnemonic> : Spmd_InferredOp<mnemonic, [Vjp]> {
  let summary = mnemonic # " over the given axes, which are removed from the shape";
  let arguments = (ins Spmd_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_ReduceSumOp : Spmd_ReduceOp<"reduce_sum">;
def Spmd_ReduceMeanOp : Spmd_ReduceOp<"reduce_mean">;
def Spmd_ReduceMaxOp : Spmd_ReduceOp<"reduce_max">;

def Spmd_ArgmaxOp : Spmd_InferredOp<"argmax", [Spmd_ZeroGradient]> {
  let summary = "index of the largest element along an axis (first one on ties), as i32";
  let arguments = (ins Spmd_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Spmd_IndexTensor:$result);
}

def Spmd_ArgsortOp : Spmd_InferredOp<"argsort", [Spmd_ZeroGradient]> {
  let summary = "the indices that sort the input along an axis, stable, as i32";
  let description = [{
    result[..., i, ...] is the index along `axis` of the i-th element in order. Ascending puts NaN
    after every number (numpy's order), descending puts it first (torch.sort(descending=True),
    torch.topk); equal elements (-0 and +0 too) keep their order.
  }];
  let arguments = (ins Spmd_FloatTensor:$input, I64Attr:$axis, DefaultValuedAttr<BoolAttr, "false">:$descending);
  let results = (outs Spmd_IndexTensor:$result);
}

//===--- dense layers and losses ------------------------------------------------------------===//

def Spmd_MatmulOp : Spmd_InferredOp<"matmul", [Vjp]> {
  let summary = "matrix product op(lhs) x op(rhs) + bias, op = optional transpose of the last two dims";
  let description = [{
    Operands are [M, K] x [K, N], or batched [B, M, K] x [B, K, N] (one product per batch entry,
    as torch.bmm); bias is [N], added to every row.
  }];
  let arguments = (ins Spmd_FloatTensor:$lhs, Spmd_FloatTensor:$rhs,
                       Optional<Spmd_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Spmd_FloatTensor:$result);
}

def Spmd_SoftmaxCrossEntropyOp : Spmd_InferredOp<"softmax_cross_entropy", [Vjp]> {
  let summary = "per-example -log softmax(logits)[label]; logits [N, C], labels [N] i32";
  let arguments = (ins Spmd_FloatTensor:$logits, Spmd_IndexTensor:$labels);
  let results = (outs Spmd_FloatTensor:$loss);
}

//===--- backward ops (emitted by VJP rules) ------------------------------------------------===//

def Spmd_Conv2dBackwardDataOp : Spmd_Op<"conv2d_backward_data", [Vjp]> {
  let summary = "gradient of conv2d w.r.t. its input; the result type is the input's";
  let description = [{
    Also the transposed convolution (spmd::convTranspose2d, torch's conv_transpose2d): the filter
    [I, O / G, KH, KW] of the convolution it transposes, the result type choosing among the sizes
    that convolution maps to result_grad's (torch's output_padding). Differentiable: its VJP is
    the convolution (w.r.t. result_grad) and the convolution's filter gradient (w.r.t. filter).
  }];
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_FloatTensor:$filter,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       OptionalAttr<DenseI64ArrayAttr>:$dilation, OptionalAttr<I64Attr>:$groups);
  let results = (outs Spmd_FloatTensor:$input_grad);
  let hasVerifier = 1;
}

def Spmd_Conv2dBackwardFilterOp : Spmd_Op<"conv2d_backward_filter", [Spmd_FirstOrderOnly]> {
  let summary = "gradient of conv2d w.r.t. its filter; the result type is the filter's";
  let arguments = (ins Spmd_FloatTensor:$input, Spmd_FloatTensor:$result_grad,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       OptionalAttr<DenseI64ArrayAttr>:$dilation, OptionalAttr<I64Attr>:$groups);
  let results = (outs Spmd_FloatTensor:$filter_grad);
  let hasVerifier = 1;
}

def Spmd_ReduceWindowBackwardOp : Spmd_Op<"reduce_window_backward", [Spmd_FirstOrderOnly]> {
  let summary = "gradient of reduce_window w.r.t. its input; the result type is the input's";
  let description = [{
    max: each window's cotangent goes to the element the window chose, the first largest in
    row-major window order or the first NaN (as PyTorch's max_pool2d index), so the forward's
    input is an operand; sum and mean: to every input element of the window (over mean's
    divisor), and the op takes result_grad alone.
  }];
  let arguments = (ins Spmd_FloatTensor:$result_grad, Optional<Spmd_FloatTensor>:$input,
                       Spmd_ReductionAttr:$reduction, DenseI64ArrayAttr:$window,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, BoolAttr:$count_include_pad);
  let results = (outs Spmd_FloatTensor:$input_grad);
  let hasVerifier = 1;
}

def Spmd_EmbeddingBackwardOp : Spmd_Op<"embedding_backward", [Vjp]> {
  let summary = "the table's gradient: result_grad rows summed into the rows their ids name";
  let description = [{
    Also the DSL's segmentSum (jax.ops.segment_sum). Its VJP is embedding of the cotangent at
    the ids, so embedding's second derivatives and segmentSum's gradients go through.
  }];
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_IndexTensor:$ids);
  let results = (outs Spmd_FloatTensor:$table_grad);
  let hasVerifier = 1;
}

def Spmd_TakeAlongAxisBackwardOp : Spmd_Op<"take_along_axis_backward", [Vjp]> {
  let summary = "input's gradient: each result_grad element added where its index points along axis";
  let description = [{
    Into zeros of input_grad's type: a scatter-add (spmd::scatterAdd adds x to it). Its own VJP
    is take_along_axis of the cotangent, so gradients of gradients and of scatterAdd go through.
  }];
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Spmd_FloatTensor:$input_grad);
  let hasVerifier = 1;
}

def Spmd_BatchNormTrainBackwardOp
    : Spmd_InferredOp<"batch_norm_train_backward", [Spmd_FirstOrderOnly]> {
  let summary = "gradients of batch_norm_train w.r.t. input, scale and offset";
  let description = [{
    `batch_mean` and `batch_variance` are the statistics the forward op returned (biased
    variance). The input gradient includes the paths through the batch statistics. With the
    forward's `mask` w: dx_n = scale rstd (dy_n - w_n / W (sum(dy) + xhat_n sum(dy xhat))),
    the sums over every row (every row's result depends on the statistics).
  }];
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_FloatTensor:$input,
                       Spmd_FloatTensor:$scale, Spmd_FloatTensor:$batch_mean,
                       Spmd_FloatTensor:$batch_variance, Optional<Spmd_FloatTensor>:$mask,
                       F64Attr:$epsilon);
  let results = (outs Spmd_FloatTensor:$input_grad, Spmd_FloatTensor:$scale_grad,
                      Spmd_FloatTensor:$offset_grad);
}

def Spmd_ReluBackwardOp
    : Spmd_Op<"relu_backward", [SameOperandsAndResultType, InferTypeOpInterface,
                                Spmd_FirstOrderOnly]> {
  let summary = "result_grad where the relu's result is positive, else 0";
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_FloatTensor:$result);
  let results = (outs Spmd_FloatTensor:$input_grad);
}

def Spmd_GeluBackwardOp
    : Spmd_Op<"gelu_backward", [SameOperandsAndResultType, InferTypeOpInterface,
                                Spmd_FirstOrderOnly]> {
  let summary = "result_grad * gelu'(input)";
  let arguments = (ins Spmd_FloatTensor:$result_grad, Spmd_FloatTensor:$input);
  let results = (outs Spmd_FloatTensor:$input_grad);
}

def Spmd_SoftmaxCrossEntropyBackwardOp
    : Spmd_InferredOp<"softmax_cross_entropy_backward", [Spmd_FirstOrderOnly]> {
  let summary = "(softmax(logits) - onehot(labels)) * loss_grad[:, None]";
  let arguments = (ins Spmd_FloatTensor:$logits, Spmd_IndexTensor:$labels,
                       Spmd_FloatTensor:$loss_grad);
  let results = (outs Spmd_FloatTensor:$logits_grad);
}

//===--- collectives across the mapped axis (spmd::pmap) ----------------------------------===//

// Every collective names the axis it runs over; the verifier checks that the enclosing function
// binds that axis (func attributes spmd.axis_name / spmd.axis_size, set by spmd::pmap).
class Spmd_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Spmd_Op<mnemonic, traits> {
  let hasVerifier = 1;
}

def Spmd_AllReduceOp : Spmd_CollectiveOp<"all_reduce", [Vjp, InferTypeOpAdaptor]> {
  let summary = "reduce (sum, mean, max, min) each operand elementwise across the replicas";
  let description = [{
    Result i is operand i reduced over every replica of the axis; the results are the same on
    all replicas (invariant). Several operands of one element type make one combined collective
    over a flat buffer, in operand order (what spmd-combine-all-reduce builds from the gradient
    all-reduces of a step). VJP (pmap semantics, each replica seeding its own loss): sum and mean
    send back the same reduction of the cotangents; max and min route the summed cotangent to
    the replicas holding the extreme value.

    With `replica_groups` (flattened, `group_size` replicas a group, every replica of the axis in
    exactly one group; jax's axis_index_groups, XLA's replica_groups) each replica reduces over its
    own group alone, in the group's order, over the fold tree of `group_size` leaves (a mean
    divides by `group_size`): the bits of this all_reduce over an axis of the group's replicas.
    The result is then invariant within each group only. psum over a mesh axis is this op over the
    mapped axis with that axis' groups.
  }];
  let arguments = (ins Variadic<Spmd_AnyTensor>:$inputs, StrAttr:$axis_name, Spmd_ReductionAttr:$reduction,
                       OptionalAttr<DenseI64ArrayAttr>:$replica_groups, OptionalAttr<I64Attr>:$group_size);
  let results = (outs Variadic<Spmd_AnyTensor>:$results);
  // Over every replica of the axis (no replica groups).
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$inputs, "::llvm::StringRef":$axis_name,
                                 "::spmd::ir::Reduction":$reduction), [{
    build($_builder, $_state, inputs, axis_name, reduction, ::mlir::DenseI64ArrayAttr(), ::mlir::IntegerAttr());
  }]>];
}

def Spmd_AllGatherOp : Spmd_CollectiveOp<"all_gather", [Vjp, InferTypeOpAdaptor]> {
  let summary = "stack every replica's operand along a new leading axis of size axis_size";
  let description = [{
    With `replica_groups` (as all_reduce's) each replica stacks its own group's operands, in the
    group's order, and axis_size is the group's size.
  }];
  let arguments = (ins Spmd_AnyTensor:$input, StrAttr:$axis_name, I64Attr:$axis_size,
                       OptionalAttr<DenseI64ArrayAttr>:$replica_groups, OptionalAttr<I64Attr>:$group_size);
  let results = (outs Spmd_AnyTensor:$result);
  // Over every replica of the axis (no replica groups).
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "::llvm::StringRef":$axis_name, "uint64_t":$axis_size), [{
    build($_builder, $_state, input, axis_name, axis_size, ::mlir::DenseI64ArrayAttr(), ::mlir::IntegerAttr());
  }]>];
}

def Spmd_ReduceScatterOp : Spmd_CollectiveOp<"reduce_scatter", [Vjp, InferTypeOpAdaptor]> {
  let summary = "sum [axis_size, ...] over replicas and keep this replica's row (psum_scatter)";
  let description = [{
    The transpose of all_gather: replica r receives sum over replicas s of input_s[r], or, with
    reduction mean, that sum divided by the replica count the job runs (as all_reduce's mean:
    no divisor is written into the program). Integers (i32) take sum only. With
    `replica_groups` (as all_reduce's; sum only) the input is [group_size, ...] and the member at
    position p of its group receives the fold of the members' rows p, in the group's order.
  }];
  let arguments = (ins Spmd_AnyTensor:$input, StrAttr:$axis_name,
                       DefaultValuedAttr<Spmd_ReductionAttr, "::spmd::ir::Reduction::Sum">:$reduction,
                       OptionalAttr<DenseI64ArrayAttr>:$replica_groups, OptionalAttr<I64Attr>:$group_size);
  let results = (outs Spmd_AnyTensor:$result);
  // Over every replica of the axis (no replica groups).
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "::llvm::StringRef":$axis_name,
                                 "::spmd::ir::Reduction":$reduction), [{
    build($_builder, $_state, input, axis_name, reduction, ::mlir::DenseI64ArrayAttr(), ::mlir::IntegerAttr());
  }]>];
}

def Spmd_PpermuteOp : Spmd_CollectiveOp<"ppermute", [Vjp, InferTypeOpAdaptor]> {
  let summary = "send each replica's operand to another replica (lax.ppermute)";
  let description = [{
    `pairs` lists (source, destination) replica pairs, flattened: [s0, d0, s1, d1, ...]; no
    source and no destination appears twice. Replica d receives source s's operand; a replica
    that is no pair's destination receives zeros. Any permutation, partial ones included
    (rings, shifts, halo exchanges). VJP: the cotangent sent back along the inverted pairs.
  }];
  let arguments = (ins Spmd_AnyTensor:$input, StrAttr:$axis_name, DenseI64ArrayAttr:$pairs);
  let results = (outs Spmd_AnyTensor:$result);
}

def Spmd_AllToAllOp : Spmd_CollectiveOp<"all_to_all", [Vjp, InferTypeOpAdaptor]> {
  let summary = "split along split_axis, send chunk j to replica j, concatenate along concat_axis";
  let description = [{
    lax.all_to_all: each replica's operand is cut into axis_size equal chunks along
    `split_axis`; replica j receives chunk j of every replica and concatenates them, in replica
    order, along `concat_axis` (the same axis or another). The result's split_axis shrinks by
    axis_size and its concat_axis grows by it. VJP: all_to_all with the two axes swapped. With
    `replica_groups` (as all_reduce's) the exchange is within each group: the member at position
    p receives chunk p of each member, in the group's order, and axis_size is the group's size.
  }];
  let arguments = (ins Spmd_AnyTensor:$input, StrAttr:$axis_name, I64Attr:$axis_size, I64Attr:$split_axis,
                       I64Attr:$concat_axis, OptionalAttr<DenseI64ArrayAttr>:$replica_groups,
                       OptionalAttr<I64Attr>:$group_size);
  let results = (outs Spmd_AnyTensor:$result);
  // Over every replica of the axis (no replica groups).
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "::llvm::StringRef":$axis_name, "uint64_t":$axis_size,
                                 "uint64_t":$split_axis, "uint64_t":$concat_axis), [{
    build($_builder, $_state, input, axis_name, axis_size, split_axis, concat_axis, ::mlir::DenseI64ArrayAttr(),
          ::mlir::IntegerAttr());
  }]>];
}

def Spmd_AxisIndexOp : Spmd_CollectiveOp<"axis_index", [Spmd_ZeroGradient, InferTypeOpAdaptor]> {
  let summary = "this replica's index along the axis, as a scalar i32";
  let description = [{
    With `of_device`, the index of the device that runs the replica: with gradient accumulation
    (spmd.micro_batches = A) each device runs A replicas in turn and this is replica / A, the
    same for all of them (spmd-shard-update slices a value at it); otherwise the replica's index.
  }];
  let arguments = (ins StrAttr:$axis_name, UnitAttr:$of_device);
  let results = (outs Spmd_IndexTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===--- autodiff ---------------------------------------------------------------------------===//

def Spmd_ValueAndGradOp : Op<Spmd_Dialect, "value_and_grad",
                             [RecursiveMemoryEffects, SingleBlock]> {
  let summary = "the body's results and the gradient of its first (scalar) result";
  let description = [{
    The body is a function of its block arguments, which stand for `primals`. It yields a
    scalar float loss first, then any auxiliary values. The op returns everything the body
    yields followed by d(loss)/d(primal) for each primal, with the primal's type. Values the
    body captures from above are constants to the derivative, as under jax.value_and_grad.
    The `spmd-autodiff` pass replaces the op with the body's ops and their VJPs, inline.
  }];
  let arguments = (ins Variadic<Spmd_FloatTensor>:$primals);
  let results = (outs Variadic<Spmd_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$primals $body attr-dict `:` functional-type($primals, results)";
  let hasVerifier = 1;
}

def Spmd_CustomVjpOp : Op<Spmd_Dialect, "custom_vjp", [RecursiveMemoryEffects]> {
  let summary = "a function with the user's own VJP (jax.custom_vjp)";
  let description = [{
    `forward` is a function of its block arguments, which stand for `inputs`: it yields the
    op's results, then the residuals `backward` reads. `backward` takes the residuals, then one
    cotangent per result, and yields one cotangent per input, of the input's type. spmd-autodiff
    inlines `forward` where the op is and, in the reverse sweep, `backward` in place of the VJP
    rules of forward's ops; where no gradient is taken only `forward` is inlined. Values forward
    reads from outside that depend on the differentiated inputs are an error (their gradient
    would be lost): pass them as inputs.
  }];
  let arguments = (ins Variadic<Spmd_FloatTensor>:$inputs);
  let results = (outs Variadic<Spmd_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$forward, SizedRegion<1>:$backward);
  let assemblyFormat = "$inputs $forward $backward attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Spmd_CustomCallOp : Spmd_Op<"custom_call", [Spmd_FirstOrderOnly]> {
  let summary = "a user's op, registered by name (spmd::registerCustomOp, frontend/CustomOp.h)";
  let description = [{
    Runs the kernel registered for `target` on its inputs; `config` is the call's attributes,
    "name=value;name=value" (runtime/device/CustomKernels.h), which the kernel reads. Result types come from the registration's
    shape rule when the call is traced. Pure: the kernel must compute its results from its
    inputs and attributes alone. A registration with a VJP is traced inside a custom_vjp whose
    backward is that VJP, so gradients never reach this op; without one, spmd-autodiff refuses
    to differentiate through it. A Program using it runs only where `target` is registered.
  }];
  let arguments = (ins Variadic<Spmd_AnyTensor>:$inputs, StrAttr:$target, DefaultValuedStrAttr<StrAttr, "">:$config);
  let results = (outs Variadic<Spmd_AnyTensor>:$results);
  let assemblyFormat = "$target `(` $inputs `)` attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Spmd_YieldOp : Op<Spmd_Dialect, "yield",
                      [Pure, Terminator, ParentOneOf<["ValueAndGradOp", "FusedOp", "CustomVjpOp"]>]> {
  let summary = "ends a value_and_grad body (the loss, then auxiliary values), a fused body, or a custom_vjp region";
  let arguments = (ins Variadic<Spmd_AnyTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

//===--- layouts -----------------------------------------------------------------------------===//

def Spmd_RelayoutOp : Spmd_Op<"relayout", [Spmd_FirstOrderOnly]> {
  let summary = "the same tensor in another memory layout (inserted by spmd-assign-layouts)";
  let description = [{
    Copies its input into the layout of its result type's encoding (ir/Layout.h): plain
    row-major when the type has none, or a blocked layout such as "nChw8c". The values are
    unchanged; only their order in memory differs.
  }];
  let arguments = (ins Spmd_FloatTensor:$input);
  let results = (outs Spmd_FloatTensor:$result);
  let hasVerifier = 1;
}

//===--- fusion ------------------------------------------------------------------------------===//

def Spmd_FusedOp : Op<Spmd_Dialect, "fused",
                      [IsolatedFromAbove, RecursiveMemoryEffects, SingleBlock,
                       Spmd_FirstOrderOnly]> {
  let summary = "a chain of elementwise ops run as one generated kernel";
  let description = [{
    Made by `spmd-fuse-elementwise` after autodiff. The body is a function of its block
    arguments (the inputs) built from elementwise ops (add, sub, mul, div, max, neg, exp, log,
    sqrt, relu, relu_backward, greater_equal), converts between f32 and bf16 (spmd-widen-bf16's
    widenings and roundings), splat constants and broadcast_in_dim of an input; it yields the
    results. Every result and every value in the body has one shape and layout, the iteration
    space, and one element type, the compute type (f32 where a result is bf16), except bf16
    values: inputs, roundings and results, which only a widening or the yield reads. An input
    is read at the same index, or through its broadcast_in_dim. Backends compile the body into
    one kernel (runtime/FusedBody): one pass over memory instead of one per op.
  }];
  let arguments = (ins Variadic<Spmd_AnyTensor>:$inputs);
  let results = (outs Variadic<Spmd_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs $body attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The element type the body computes in: f32 where a result is bf16.
    ::mlir::Type computeType();
  }];
}

#endif
