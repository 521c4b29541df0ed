// The body of a `fused` step (spmd.fused lowered by the compiler): a straight-line program over
// one iteration space, in text so Programs stay readable and backends need no MLIR:
//   "%0 = load 0; %1 = load 1 dims [1]; %2 = const 0.5; %3 = mul %0 %2; %4 = add %3 %1; yield %4"
// `load K` reads input K at the element's index; `load K dims [...]` reads it through a
// broadcast_in_dim (input dim i is result dim dims[i]). Every backend evaluates the same parse.
// The body computes in one type, fusedComputeType: the outputs', or f32 where inputs or outputs
// are bf16 (a bf16 step's roundings fused, passes/FuseElementwise.cpp): a bf16 input is widened
// as it is loaded (exact), a bf16 output rounded as it is stored, and `round_bf16 %k` is %k
// rounded to the nearest bf16 value (runtime/base/BFloat16.h's rounding), kept in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/ElementwiseTable.h"

namespace spmd::runtime {

// load, constant, round_bf16, then one kind per elementwise op of the table, by the op's name.
enum class FusedOpKind : uint8_t {
  load,
  constant,
  round_bf16,
#define SPMD_FUSED_KIND(name, ...) name,
  SPMD_ELEMENTWISE_OPS(SPMD_FUSED_KIND)
#undef SPMD_FUSED_KIND
};

struct FusedInstr {
  FusedOpKind kind = FusedOpKind::load;
  int a = -1, b = -1;          // operand instructions (elementwise ops)
  int input = -1;              // load: which input
  bool broadcast = false;      // load through dims
  std::vector<int64_t> dims;   // load: input dim i -> result dim dims[i]
  double value = 0;            // constant
};

struct FusedBody {
  std::vector<FusedInstr> instrs;
  std::vector<int> results;  // instruction per output, in output order

  // Throws an Error quoting the text and saying what is malformed.
  static FusedBody parse(const std::string& text);
  // Throws unless the body loads only inputs < `inputs` and yields exactly `outputs` values.
  void checkArity(size_t inputs, size_t outputs) const;
};

const char* fusedOpName(FusedOpKind kind);
// The type a fused step's body computes in, from its operands' dtypes: the outputs' (f32 or f64),
// f32 where any is bf16. Throws, naming the operand, unless every input and output is of that type
// or, where it is f32, bf16.
DType fusedComputeType(std::span<const DType> inputs, std::span<const DType> outputs);
// The most segments a `fused` step may have (compiler/BatchFused) with `inputs` and `outputs`
// tensors each: what keeps the GPU kernel's segment table (runtime/kernels/FusedSource.h: a start
// and the pointers per segment, passed by value with the element count) within CUDA's 4 KiB of
// kernel parameters.
inline int64_t maxFusedSegments(size_t inputs, size_t outputs) {
  return (4096 - 16) / int64_t(8 * (inputs + outputs + 1));
}
int fusedArity(FusedOpKind kind);  // operands of an elementwise kind; 0 for load and constant

// Element strides into `input` per dim of `space`, 0 along broadcast dims. Throws when the input
// cannot be read that way (a direct load of another shape, or dims that do not fit).
std::vector<int64_t> loadStrides(const FusedInstr& load, std::span<const int64_t> input,
                                 std::span<const int64_t> space);

}  // namespace spmd::runtime
