// spmd-fuse-relu: a relu reading only a batch_norm_train's or a conv2d's result becomes its
// relu attribute; a result with another user keeps its relu.
// RUN: spmd-opt %s --spmd-fuse-relu --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x4x3x3xf32>, %s: tensor<4xf32>, %o: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>) {
  // CHECK-NEXT: %[[Y:.*]], %[[M:.*]], %{{.*}} = spmd.batch_norm_train %arg0, %arg1, %arg2 {epsilon = 1.000000e-05 : f64, relu = true}
  // CHECK-NEXT: return %[[Y]], %[[M]]
  %y, %m, %v = spmd.batch_norm_train %x, %s, %o {epsilon = 1.0e-5 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = spmd.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %r, %m : tensor<2x4x3x3xf32>, tensor<4xf32>
}

// -----

// The normalized result is also returned: the relu stays an op of its own.
// CHECK-LABEL: func.func @shared
func.func @shared(%x: tensor<2x4x3x3xf32>, %s: tensor<4xf32>, %o: tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>) {
  // CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = spmd.batch_norm_train %arg0, %arg1, %arg2 {epsilon = 1.000000e-05 : f64}
  // CHECK-NEXT: %[[R:.*]] = spmd.relu %[[Y]]
  // CHECK-NEXT: return %[[R]], %[[Y]]
  %y, %m, %v = spmd.batch_norm_train %x, %s, %o {epsilon = 1.0e-5 : f64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = spmd.relu %y : (tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return %r, %y : tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>
}

// -----

// A convolution's relu (with a bias and without) becomes its attribute; the relu's readers (here
// relu_backward, as autodiff builds it) read the convolution's result.
// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<2x3x5x5xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %dy: tensor<2x4x5x5xf32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) {
  // CHECK-NEXT: %[[Y:.*]] = spmd.conv2d %arg0, %arg1, %arg2 {padding = array<i64: 1, 1>, relu = true, stride = array<i64: 1, 1>}
  // CHECK-NEXT: %[[Z:.*]] = spmd.conv2d %arg0, %arg1 {padding = array<i64: 1, 1>, relu = true, stride = array<i64: 1, 1>}
  // CHECK-NEXT: %[[G:.*]] = spmd.relu_backward %arg3, %[[Y]]
  // CHECK-NEXT: return %[[G]], %[[Z]]
  %y = spmd.conv2d %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x5x5xf32>
  %r = spmd.relu %y : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  %z = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  %s = spmd.relu %z : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  %g = spmd.relu_backward %dy, %r : (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  return %g, %s : tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>
}

// -----

// A convolution result read by something besides the relu keeps its relu; a relu of a relu'd
// convolution (already fused) stays.
// CHECK-LABEL: func.func @conv_shared
func.func @conv_shared(%x: tensor<2x3x5x5xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>) {
  // CHECK-NEXT: %[[Y:.*]] = spmd.conv2d %arg0, %arg1 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>}
  // CHECK-NEXT: %[[R:.*]] = spmd.relu %[[Y]]
  // CHECK-NEXT: %[[Z:.*]] = spmd.conv2d %arg0, %arg1 {padding = array<i64: 1, 1>, relu = true, stride = array<i64: 1, 1>}
  // CHECK-NEXT: %[[S:.*]] = spmd.relu %[[Z]]
  // CHECK-NEXT: return %[[R]], %[[Y]], %[[S]]
  %y = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  %r = spmd.relu %y : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  %z = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, relu = true} : (tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x5x5xf32>
  %s = spmd.relu %z : (tensor<2x4x5x5xf32>) -> tensor<2x4x5x5xf32>
  return %r, %y, %s : tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>
}
