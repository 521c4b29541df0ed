// spmd-fuse-norm-relu: a relu reading only a batch_norm_train's result becomes its relu
// attribute; a batch norm result with another user keeps its relu.
// RUN: spmd-opt %s --spmd-fuse-norm-relu --split-input-file | FileCheck %s

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
