// spmd-widen-bf16 rewrites a function's own ops; an op with a region on bf16 (a value_and_grad
// not yet expanded by spmd-autodiff) is an error that says where the pass belongs.
// RUN: not spmd-opt %s --spmd-widen-bf16 2>&1 | FileCheck %s

// CHECK: error: 'spmd.value_and_grad' op has a region and bf16 operands or results, which spmd-widen-bf16 does not rewrite; it runs after spmd-autodiff
func.func @unexpanded(%x: tensor<3xbf16>) -> (tensor<bf16>, tensor<3xbf16>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xbf16>):
    %sq = spmd.mul %a, %a : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
    %s = spmd.reduce_sum %sq {axes = array<i64: 0>} : (tensor<3xbf16>) -> tensor<bf16>
    spmd.yield %s : tensor<bf16>
  } : (tensor<3xbf16>) -> (tensor<bf16>, tensor<3xbf16>)
  return %l, %g : tensor<bf16>, tensor<3xbf16>
}
