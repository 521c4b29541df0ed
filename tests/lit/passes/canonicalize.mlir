// --canonicalize with the spmd folders: identity reshape/transpose/broadcast vanish, reshape
// chains collapse, constants fold through reshape and splat broadcasts, dead ops go.
// RUN: spmd-opt %s --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = spmd.reshape %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = spmd.transpose %0 {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = spmd.broadcast_in_dim %1 {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @reshape_chain
// CHECK-NEXT: %[[R:.*]] = spmd.reshape %arg0 : (tensor<2x3x4xf32>) -> tensor<24xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<24xf32> {
  %0 = spmd.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = spmd.reshape %0 : (tensor<6x4xf32>) -> tensor<24xf32>
  return %1 : tensor<24xf32>
}

// CHECK-LABEL: func.func @constant_folding
// CHECK-DAG: spmd.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: spmd.constant dense<5.000000e-01> : tensor<2x2xf32>
// CHECK-NOT: spmd.reshape
// CHECK-NOT: spmd.broadcast_in_dim
func.func @constant_folding() -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %c = spmd.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %0 = spmd.reshape %c : (tensor<4xf32>) -> tensor<2x2xf32>
  %h = spmd.constant dense<0.5> : tensor<2xf32>
  %1 = spmd.broadcast_in_dim %h {dims = array<i64: 1>} : (tensor<2xf32>) -> tensor<2x2xf32>
  return %0, %1 : tensor<2x2xf32>, tensor<2x2xf32>
}

// CHECK-LABEL: func.func @dead_code
// CHECK-NOT: spmd.exp
// CHECK: spmd.relu
func.func @dead_code(%x: tensor<8xf32>) -> tensor<8xf32> {
  %unused = spmd.exp %x : (tensor<8xf32>) -> tensor<8xf32>
  %y = spmd.relu %x : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// A real transpose and broadcast stay.
// CHECK-LABEL: func.func @kept
// CHECK: spmd.transpose
// CHECK: spmd.broadcast_in_dim
func.func @kept(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<3x2xf32>, tensor<2x3xf32>) {
  %0 = spmd.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = spmd.broadcast_in_dim %b {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<3x2xf32>, tensor<2x3xf32>
}

// Binary ops: splat constants fold, and x + 0, x - 0, x * 1, 1 * x, x / 1 are x (the loss seed
// of autodiff multiplies by a splat 1). 0 - x, x / 0 and max with a constant stay.
// CHECK-LABEL: func.func @binary_identities
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-DAG: %[[SIX:.*]] = spmd.constant dense<6.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[ZERO:.*]] = spmd.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[NEG:.*]] = spmd.sub %[[ZERO]], %[[X]]
// CHECK-DAG: %[[MAX:.*]] = spmd.max %[[X]], %[[ZERO]]
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[SIX]], %[[NEG]], %[[MAX]]
func.func @binary_identities(%x: tensor<3xf32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
        tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %zero = spmd.constant dense<0.0> : tensor<3xf32>
  %one = spmd.constant dense<1.0> : tensor<3xf32>
  %two = spmd.constant dense<2.0> : tensor<3xf32>
  %three = spmd.constant dense<3.0> : tensor<3xf32>
  %a = spmd.add %x, %zero : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = spmd.sub %x, %zero : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %c = spmd.mul %x, %one : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %d = spmd.mul %one, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e = spmd.div %x, %one : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %f = spmd.mul %two, %three : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = spmd.sub %zero, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %h = spmd.max %x, %zero : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %a, %b, %c, %d, %e, %f, %g, %h : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
