// spmd-insert-pmean: a replicated output that varies and is neither a scalar nor a new value of a
// replicated input of its type is an error at the value's line (never a silent average). The
// allowed cases (gradients, the loss, a running statistic) are in insert_pmean.mlir.
// RUN: spmd-opt %s --spmd-insert-pmean --split-input-file --verify-diagnostics

// Logits returned without out_axes.
func.func @logits(%w: tensor<4x3xf32>, %x: tensor<8x4xf32> {spmd.mapped})
    -> (tensor<8x3xf32> {spmd.name = "logits"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{spmd-insert-pmean: replicated output 0 ('logits') of type 'tensor<8x3xf32>' varies across axis 'batch' (it is computed from mapped data) and is neither a scalar (a loss or metric, averaged) nor a new value of a replicated input of its type (parameters, BatchNorm statistics, averaged), so averaging it would be a guess; return it per replica with outAxes = 0 (spmd::PmapOptions), or average it yourself with spmd::pmean(value, "batch")}}
  %h = spmd.matmul %x, %w : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  return %h : tensor<8x3xf32>
}

// -----

// A per-example value whose type matches a replicated input it is not computed from: still an
// error (the second output is fine: a scalar loss is averaged).
func.func @per_example(%b: tensor<8xf32>, %w: tensor<4xf32>, %x: tensor<8x4xf32> {spmd.mapped})
    -> (tensor<8xf32> {spmd.name = "per_example_loss"}, tensor<f32> {spmd.name = "loss"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %wb = spmd.broadcast_in_dim %w {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<8x4xf32>
  %p = spmd.mul %x, %wb : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  // expected-error @+1 {{replicated output 0 ('per_example_loss') of type 'tensor<8xf32>' varies across axis 'batch'}}
  %e = spmd.reduce_sum %p {axes = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<8xf32>
  %l = spmd.reduce_mean %e {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
  return %e, %l : tensor<8xf32>, tensor<f32>
}
