// Malformed IR text gives a located parse error, never a crash.
// RUN: not spmd-opt %s -split-input-file 2>&1 | FileCheck %s

// CHECK: error: custom op 'spmd.bogus' is unknown
func.func @unknown(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = spmd.bogus %x : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK: error: expected ':'
func.func @missing_type(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = spmd.relu %x
  return %0 : tensor<2xf32>
}

// -----

// CHECK: error: use of undeclared SSA value name
func.func @undeclared(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = spmd.relu %nope : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// CHECK: error: 'spmd.conv2d' op requires attribute 'stride'
func.func @missing_attr(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> {
  %0 = spmd.conv2d %x, %w {padding = array<i64: 0, 0>} : (tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  return %0 : tensor<1x1x2x2xf32>
}

// -----

// CHECK: error: expected ::spmd::ir::Reduction to be one of: sum, mean, max, min
func.func @bad_reduction(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<prod>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
