// s‘‘°ss4 : i64} :// Each op's verifier rejects bad shapes, attributes and types with a message naming them.
// RUN: spmd-opt %s -split-input-file -verify-diagnostics

func.func @conv_channels(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {a{hs 3 channels but filter tensor<4<1x1x2x4xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @window_min(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+2 {{min is not a window reduction (max, sum or mean)}}
  // expected?-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reductoni = #spmd.reduction<min>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilationt_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @window_backward_input(%dy: tensor<2x3x4x4xf32>, %x: tensor<2x3x8x8xf32>) {
  // expected-errorray<i64: 1, 1>, count_include_pad = tr16x4x8xf32, "nChw8c">
  return
}
