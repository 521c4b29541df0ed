// spmd-fuse-elementwise: elementwise chains of one shape become spmd.fused ops whose bodies hold
// the chain; broadcasts and splat constants are absorbed; values used outside become results;
// an op whose group value is read by an earlier outside op is not fused into that group.
// RUN: spmd-opt %s --spmd-fuse-elementwise --split-input-file | FileCheck %s

// Residual add + relu, the add also returned: one fused op with two results.
// CHECK-LABEL: func.func @residual
func.func @residual(%x: tensor<2x4xf32>, %s: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK-NEXT: %[[F:.*]]:2 = spmd.fused %arg0, %arg1 {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4xf32>, %[[B:.*]]: tensor<2x4xf32>):
  // CHECK-NEXT:   %[[SUM:.*]] = spmd.add %[[A]], %[[B]]
  // CHECK-NEXT:   %[[R:.*]] = spmd.relu %[[SUM]]
  // CHECK-NEXT:   spmd.yield %[[SUM]], %[[R]] : tensor<2x4xf32>, tensor<2x4xf32>
  // CHECK-NEXT: } : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  // CHECK-NEXT: return %[[F]]#1, %[[F]]#0
  %sum = spmd.add %x, %s : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = spmd.relu %sum : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %r, %sum : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// An SGD-style update: the learning rate (a splat constant) and a per-channel broadcast are
// cloned into the body; the broadcast's small operand is the input.
// CHECK-LABEL: func.func @update
func.func @update(%p: tensor<3x5xf32>, %g: tensor<3x5xf32>, %b: tensor<5xf32>) -> tensor<3x5xf32> {
  // CHECK-NEXT: %[[F:.*]] = spmd.fused %arg1, %arg2, %arg0 {
  // CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<3x5xf32>, %[[B:.*]]: tensor<5xf32>, %[[P:.*]]: tensor<3x5xf32>):
  // CHECK-NEXT:   %[[BB:.*]] = spmd.broadcast_in_dim %[[B]] {dims = array<i64: 1>}
  // CHECK-NEXT:   %[[GB:.*]] = spmd.add %[[G]], %[[BB]]
  // CHECK-NEXT:   %[[LR:.*]] = spmd.constant dense<1.000000e-01> : tensor<3x5xf32>
  // CHECK-NEXT:   %[[STEP:.*]] = spmd.mul %[[GB]], %[[LR]]
  // CHECK-NEXT:   %[[NEW:.*]] = spmd.sub %[[P]], %[[STEP]]
  // CHECK-NEXT:   spmd.yield %[[NEW]]
  // CHECK-NOT: spmd.constant
  // CHECK-NOT: spmd.broadcast_in_dim
  // CHECK: return %[[F]]
  %lr = spmd.constant dense<0.1> : tensor<3x5xf32>
  %bb = spmd.broadcast_in_dim %b {dims = array<i64: 1>} : (tensor<5xf32>) -> tensor<3x5xf32>
  %gb = spmd.add %g, %bb : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %step = spmd.mul %gb, %lr : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  %new = spmd.sub %p, %step : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  return %new : tensor<3x5xf32>
}

// -----

// %e feeds reduce_sum, whose broadcast result the later mul needs: fusing the mul into %e's group
// would put the fused op after reduce_sum, which reads it. So exp + neg fuse, and the mul + relu
// after the reduction form a second group. A lone op (the final sqrt on another shape) stays.
// CHECK-LABEL: func.func @no_cycle
func.func @no_cycle(%x: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4xf32>) {
  // CHECK-NEXT: %[[F1:.*]]:2 = spmd.fused %arg0 {
  // CHECK:        spmd.exp
  // CHECK-NEXT:   spmd.neg
  // CHECK:      %[[S:.*]] = spmd.reduce_sum %[[F1]]#0
  // CHECK-NEXT: %[[F2:.*]] = spmd.fused %[[F1]]#1, %[[S]] {
  // CHECK:        spmd.broadcast_in_dim
  // CHECK-NEXT:   spmd.mul
  // CHECK-NEXT:   spmd.relu
  // CHECK:      %[[Q:.*]] = spmd.sqrt %[[S]] : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: return %[[F2]], %[[Q]]
  %e = spmd.exp %x : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %n = spmd.neg %e : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %s = spmd.reduce_sum %e {axes = array<i64: 1>} : (tensor<4x3xf32>) -> tensor<4xf32>
  %sb = spmd.broadcast_in_dim %s {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x3xf32>
  %m = spmd.mul %n, %sb : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = spmd.relu %m : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %q = spmd.sqrt %s : (tensor<4xf32>) -> tensor<4xf32>
  return %r, %q : tensor<4x3xf32>, tensor<4xf32>
}

// -----

// A bf16 step's roundings (spmd-widen-bf16's converts) fuse with the ops between them: the body
// reads the bf16 operands, widens them, computes in f32 and yields the rounded result as bf16
// and, where a reader needs it, its widening as f32. A convert to f64 is no rounding: it stays.
// CHECK-LABEL: func.func @bf16_roundings
func.func @bf16_roundings(%x: tensor<2x4xbf16>, %g: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2x4xf64>) {
  // CHECK-NEXT: %[[F:.*]]:2 = spmd.fused %arg0, %arg1 {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4xbf16>, %[[G:.*]]: tensor<2x4xbf16>):
  // CHECK-NEXT:   %[[XW:.*]] = spmd.convert %[[X]] : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  // CHECK-NEXT:   %[[GW:.*]] = spmd.convert %[[G]] : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  // CHECK-NEXT:   %[[D:.*]] = spmd.relu_backward %[[XW]], %[[GW]]
  // CHECK-NEXT:   %[[R:.*]] = spmd.convert %[[D]] : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  // CHECK-NEXT:   %[[RW:.*]] = spmd.convert %[[R]] : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  // CHECK-NEXT:   spmd.yield %[[R]], %[[RW]] : tensor<2x4xbf16>, tensor<2x4xf32>
  // CHECK-NEXT: } : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xf32>)
  // CHECK-NEXT: %[[D64:.*]] = spmd.convert %[[F]]#1 : (tensor<2x4xf32>) -> tensor<2x4xf64>
  // CHECK-NEXT: return %[[F]]#0, %[[F]]#1, %[[D64]]
  %xw = spmd.convert %x : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %gw = spmd.convert %g : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %d = spmd.relu_backward %xw, %gw : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = spmd.convert %d : (tensor<2x4xf32>) -> tensor<2x4xbf16>
  %rw = spmd.convert %r : (tensor<2x4xbf16>) -> tensor<2x4xf32>
  %d64 = spmd.convert %rw : (tensor<2x4xf32>) -> tensor<2x4xf64>
  return %r, %rw, %d64 : tensor<2x4xbf16>, tensor<2x4xf32>, tensor<2x4xf64>
}

// -----

// A widening read only by a reshape moves after it (the reshape moves bf16 elements), so it fuses
// with the add that reads the reshape; a rounding of a transpose read by nothing else moves
// before the transpose, into the add's body. The reshape of %y is also read as f32 by the return,
// so its rounding stays where it is.
// CHECK-LABEL: func.func @converts_across_views
func.func @converts_across_views(%m: tensor<4x6xbf16>, %b: tensor<2x12xf32>, %y: tensor<3x4xf32>) -> (tensor<12x2xbf16>, tensor<4x3xf32>, tensor<4x3xbf16>) {
  // CHECK-NEXT: %[[R:.*]] = spmd.reshape %arg0 : (tensor<4x6xbf16>) -> tensor<2x12xbf16>
  // CHECK-NEXT: %[[F:.*]] = spmd.fused %[[R]], %arg1 {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x12xbf16>, %[[B:.*]]: tensor<2x12xf32>):
  // CHECK-NEXT:   %[[W:.*]] = spmd.convert %[[A]] : (tensor<2x12xbf16>) -> tensor<2x12xf32>
  // CHECK-NEXT:   %[[S:.*]] = spmd.add %[[W]], %[[B]]
  // CHECK-NEXT:   %[[N:.*]] = spmd.convert %[[S]] : (tensor<2x12xf32>) -> tensor<2x12xbf16>
  // CHECK-NEXT:   spmd.yield %[[N]] : tensor<2x12xbf16>
  // CHECK-NEXT: } : (tensor<2x12xbf16>, tensor<2x12xf32>) -> tensor<2x12xbf16>
  // CHECK-NEXT: %[[T:.*]] = spmd.transpose %[[F]] {perm = array<i64: 1, 0>} : (tensor<2x12xbf16>) -> tensor<12x2xbf16>
  // CHECK-NEXT: %[[Y:.*]] = spmd.reshape %arg2 : (tensor<3x4xf32>) -> tensor<4x3xf32>
  // CHECK-NEXT: %[[YR:.*]] = spmd.convert %[[Y]] : (tensor<4x3xf32>) -> tensor<4x3xbf16>
  // CHECK-NEXT: return %[[T]], %[[Y]], %[[YR]]
  %w = spmd.convert %m : (tensor<4x6xbf16>) -> tensor<4x6xf32>
  %r = spmd.reshape %w : (tensor<4x6xf32>) -> tensor<2x12xf32>
  %s = spmd.add %r, %b : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
  %t = spmd.transpose %s {perm = array<i64: 1, 0>} : (tensor<2x12xf32>) -> tensor<12x2xf32>
  %n = spmd.convert %t : (tensor<12x2xf32>) -> tensor<12x2xbf16>
  %y2 = spmd.reshape %y : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %yr = spmd.convert %y2 : (tensor<4x3xf32>) -> tensor<4x3xbf16>
  return %n, %y2, %yr : tensor<12x2xbf16>, tensor<4x3xf32>, tensor<4x3xbf16>
}
