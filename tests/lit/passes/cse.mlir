// --cse merges identical pure spmd ops (same operands and attributes), keeps different ones.
// RUN: spmd-opt %s --cse | FileCheck %s

// CHECK-LABEL: func.func @merge
func.func @merge(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x6x6xf32>) {
  // CHECK: %[[A:.*]] = spmd.conv2d %arg0, %arg1 {padding = array<i64: 1, 1>
  // CHECK-NOT: spmd.conv2d %arg0, %arg1 {padding = array<i64: 1, 1>
  // CHECK: %[[B:.*]] = spmd.conv2d %arg0, %arg1 {padding = array<i64: 0, 0>
  // CHECK: return %[[A]], %[[A]], %[[B]]
  %0 = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %2 = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return %0, %1, %2 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x6x6xf32>
}
