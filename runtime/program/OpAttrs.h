// Typed attribute records: the attributes of a step decoded once, before its first call, into a
// struct per attribute set (stride and padding as vectors, the reduction kind as the Reduction
// enum, flags as bools), so that kernels read fields instead of looking names up and parsing
// text on every call. Each record's field list below is the one definition of its attributes:
// it declares the struct's members and gives the catalog's rows (programAttributes, which
// checkProgram holds every step to, and OpCoverageTest against the dialect's ODS arguments).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/program/Catalog.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

// A field's C++ type by the word its list names it with.
namespace attr_field {
using Int = int64_t;
using Ints = std::vector<int64_t>;
using Real = double;
using Flag = bool;
using Text = std::string;
using ReductionKind = Reduction;  // text in a Program ("sum"), the enum in the record
}  // namespace attr_field

// The field lists: F(type, name, required). An optional field absent from a step reads as its
// type's zero (false for a flag, 0 for an integer).
#define SPMD_CONV_ATTRS(F) F(Ints, stride, true) F(Ints, padding, true) F(Ints, dilation, false) F(Int, groups, false)
#define SPMD_CONV_RELU_ATTRS(F) \
  F(Ints, stride, true) F(Ints, padding, true) F(Flag, relu, false) F(Ints, dilation, false) F(Int, groups, false)
#define SPMD_EPSILON_ATTRS(F) F(Real, epsilon, true)
#define SPMD_NORM_RELU_ATTRS(F) F(Real, epsilon, true) F(Flag, relu, false)
#define SPMD_WINDOW_ATTRS(F)                                                                   \
  F(ReductionKind, reduction, true) F(Ints, window, true) F(Ints, stride, true) F(Ints, padding, true) \
  F(Ints, dilation, true) F(Flag, count_include_pad, true)
#define SPMD_AXIS_ATTRS(F) F(Int, axis, true)
#define SPMD_SORT_ATTRS(F) F(Int, axis, true) F(Flag, descending, false)
#define SPMD_SCATTER_REDUCE_ATTRS(F) F(Int, axis, true) F(ReductionKind, reduction, true)
#define SPMD_SEGMENT_ATTRS(F) F(ReductionKind, reduction, true)
#define SPMD_AXES_ATTRS(F) F(Ints, axes, true)
#define SPMD_DIMS_ATTRS(F) F(Ints, dims, true)
#define SPMD_SLICE_ATTRS(F) F(Ints, start, true) F(Ints, limit, true)
#define SPMD_PAD_ATTRS(F) F(Ints, low, true) F(Ints, high, true)
#define SPMD_PERM_ATTRS(F) F(Ints, perm, true)
#define SPMD_MATMUL_ATTRS(F) F(Flag, transpose_lhs, false) F(Flag, transpose_rhs, false)
#define SPMD_ALL_REDUCE_ATTRS(F) \
  F(Text, axis_name, true) F(ReductionKind, reduction, true) F(Ints, replica_groups, false) F(Int, group_size, false)
#define SPMD_REDUCE_SCATTER_ATTRS(F) \
  F(Text, axis_name, true) F(ReductionKind, reduction, true) F(Ints, replica_groups, false) F(Int, group_size, false)
#define SPMD_ALL_GATHER_ATTRS(F) \
  F(Text, axis_name, true) F(Int, axis_size, true) F(Ints, replica_groups, false) F(Int, group_size, false)
#define SPMD_PPERMUTE_ATTRS(F) F(Text, axis_name, true) F(Ints, pairs, true)
#define SPMD_ALL_TO_ALL_ATTRS(F)                                                                      \
  F(Text, axis_name, true) F(Int, axis_size, true) F(Int, split_axis, true) F(Int, concat_axis, true) \
  F(Ints, replica_groups, false) F(Int, group_size, false)
#define SPMD_AXIS_INDEX_ATTRS(F) F(Text, axis_name, true) F(Flag, of_device, false)
#define SPMD_FUSED_ATTRS(F) F(Text, body, true) F(Int, segments, false)
#define SPMD_CUSTOM_CALL_ATTRS(F) F(Text, target, true) F(Text, config, false)

// The records: X(Record, FIELD_LIST).
#define SPMD_ATTR_RECORDS(X)                                                                     \
  X(ConvAttrs, SPMD_CONV_ATTRS) X(ConvReluAttrs, SPMD_CONV_RELU_ATTRS) X(EpsilonAttrs, SPMD_EPSILON_ATTRS) X(NormReluAttrs, SPMD_NORM_RELU_ATTRS) \
  X(WindowAttrs, SPMD_WINDOW_ATTRS) X(AxisAttrs, SPMD_AXIS_ATTRS) X(SortAttrs, SPMD_SORT_ATTRS) X(ScatterReduceAttrs, SPMD_SCATTER_REDUCE_ATTRS) X(SegmentAttrs, SPMD_SEGMENT_ATTRS) X(AxesAttrs, SPMD_AXES_ATTRS)           \
  X(DimsAttrs, SPMD_DIMS_ATTRS) X(SliceAttrs, SPMD_SLICE_ATTRS) X(PadAttrs, SPMD_PAD_ATTRS)                \
  X(PermAttrs, SPMD_PERM_ATTRS) X(MatmulAttrs, SPMD_MATMUL_ATTRS) X(AllReduceAttrs, SPMD_ALL_REDUCE_ATTRS) X(ReduceScatterAttrs, SPMD_REDUCE_SCATTER_ATTRS) \
  X(AllGatherAttrs, SPMD_ALL_GATHER_ATTRS) X(PpermuteAttrs, SPMD_PPERMUTE_ATTRS)                           \
  X(AllToAllAttrs, SPMD_ALL_TO_ALL_ATTRS) X(AxisIndexAttrs, SPMD_AXIS_INDEX_ATTRS) X(FusedAttrs, SPMD_FUSED_ATTRS) \
  X(CustomCallAttrs, SPMD_CUSTOM_CALL_ATTRS)

// Which record each op's steps carry: X(op, Record). Ops not named have no attributes.
#define SPMD_OP_ATTR_RECORDS(X)                                                                   \
  X(conv2d, ConvReluAttrs) X(conv2d_backward_data, ConvAttrs) X(conv2d_backward_filter, ConvAttrs)      \
  X(batch_norm_infer, EpsilonAttrs) X(batch_norm_train_backward, EpsilonAttrs)                       \
  X(batch_norm_train, NormReluAttrs) X(reduce_window, WindowAttrs) X(reduce_window_backward, WindowAttrs) \
  X(softmax, AxisAttrs) X(log_softmax, AxisAttrs) X(concatenate, AxisAttrs) X(argmax, AxisAttrs) X(argsort, SortAttrs) \
  X(take_along_axis, AxisAttrs) X(take_along_axis_backward, AxisAttrs) X(scatter, AxisAttrs)       \
  X(scatter_reduce, ScatterReduceAttrs) X(segment_reduce, SegmentAttrs)                              \
  X(reduce_sum, AxesAttrs) X(reduce_mean, AxesAttrs) X(reduce_max, AxesAttrs)                        \
  X(broadcast_in_dim, DimsAttrs) X(slice, SliceAttrs) X(pad, PadAttrs) X(transpose, PermAttrs)       \
  X(matmul, MatmulAttrs) X(all_reduce, AllReduceAttrs) X(reduce_scatter, ReduceScatterAttrs)             \
  X(all_gather, AllGatherAttrs) X(ppermute, PpermuteAttrs) X(all_to_all, AllToAllAttrs)              \
  X(axis_index, AxisIndexAttrs) X(fused, FusedAttrs) X(custom_call, CustomCallAttrs)

#define SPMD_ATTR_MEMBER(type, name, required) attr_field::type name{};
#define SPMD_ATTR_RECORD(Record, FIELDS) \
  struct Record {                        \
    FIELDS(SPMD_ATTR_MEMBER)             \
    static const AttrSpec kSpecs[];      \
  };
SPMD_ATTR_RECORDS(SPMD_ATTR_RECORD)
#undef SPMD_ATTR_RECORD
#undef SPMD_ATTR_MEMBER

#define SPMD_ATTR_ALTERNATIVE(Record, FIELDS) , Record
struct OpRecord {
  std::variant<std::monostate SPMD_ATTR_RECORDS(SPMD_ATTR_ALTERNATIVE)> value;
};
#undef SPMD_ATTR_ALTERNATIVE

// Decodes `step`'s attributes into its op's record (step.record); throws naming the step and
// the attribute when one is missing, of the wrong kind, or not a reduction's name. The executor
// does this for every step of its Program, after checkProgram; tests that call kernels on a
// hand-made step do it themselves.
void decodeAttributes(Step& step);
// The same record, decoded now and returned (compiler passes and checks that read a step once).
OpRecord decodedAttributes(const Step& step);

// The step's record: its decoded attributes. Throws when the step was not decoded, or carries
// another record (both bugs in spmd, not in a user's program).
template <class Record>
const Record& attrsOf(const Step& step) {
  if (step.record)
    if (const Record* record = std::get_if<Record>(&step.record->value)) return *record;
  throw Error("step '" + step.op + "' (" + step.where() +
              (step.record ? ") carries another op's attribute record" : ") ran before its attributes were decoded") +
              "; this is a bug in spmd");
}

// A convolution step's attributes, the one view every convolution kernel reads: stride and
// padding (conv2d's ConvReluAttrs, a gradient's ConvAttrs), whether the step writes max(0, y) (a
// conv2d with relu, spmd-fuse-relu's form), the dilation and the groups (absent: 1).
struct ConvView {
  const std::vector<int64_t>& stride;
  const std::vector<int64_t>& padding;
  bool relu;
  std::array<int64_t, 2> dilation = {1, 1};
  int64_t groups = 1;
  // Neither dilated nor grouped: the one form our own convolution kernels (Winograd, the strided
  // GEMMs, the sliced and direct ones, the CUDA GEMM variant) run; the others go to the library's
  // kernels (oneDNN, cuDNN) and the reference loops.
  bool plain() const { return groups == 1 && dilation[0] == 1 && dilation[1] == 1; }
};
inline ConvView convAttrs(const Step& step) {
  auto view = [](const auto& a, bool relu) {
    ConvView v{a.stride, a.padding, relu};
    if (a.dilation.size() == 2) v.dilation = {a.dilation[0], a.dilation[1]};
    if (a.groups > 0) v.groups = a.groups;
    return v;
  };
  if (step.record)
    if (const auto* forward = std::get_if<ConvReluAttrs>(&step.record->value)) return view(*forward, forward->relu);
  return view(attrsOf<ConvAttrs>(step), false);
}

// The epsilon of a batch_norm_train (NormReluAttrs), _infer or _train_backward (EpsilonAttrs)
// step: the kernels one code serves.
inline double normEpsilon(const Step& step) {
  if (step.record)
    if (const auto* train = std::get_if<NormReluAttrs>(&step.record->value)) return train->epsilon;
  return attrsOf<EpsilonAttrs>(step).epsilon;
}

}  // namespace spmd::runtime
