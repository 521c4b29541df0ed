// --spmd-autodiff with a checkpoint segment (spmd.remat, set by spmd::checkpoint): where the
// reverse sweep reaches the segment, its ops are copied (marked spmd.recomputed, so CSE keeps
// them apart) and the segment's VJP rules read the copies; the forward values inside the segment
// are then read by the forward pass only. The segment's output (%t) stays stored: the op after
// the segment (outside it) still reads the forward value in its own VJP.
// RUN: spmd-opt %s --split-input-file --spmd-autodiff --canonicalize --cse | FileCheck %s

// CHECK-LABEL: func.func @remat
// CHECK: %[[E:.*]] = spmd.exp %arg0 {spmd.remat = 0 : i64}
// CHECK-NEXT: %[[T:.*]] = spmd.tanh %[[E]] {spmd.remat = 0 : i64}
// CHECK-NEXT: %[[M:.*]] = spmd.mul %[[T]], %arg0
// CHECK-NEXT: %[[L:.*]] = spmd.reduce_sum %[[M]]
// The backward pass: the segment recomputed from its input, after the forward pass.
// CHECK-NEXT: %[[E2:.*]] = spmd.exp %arg0 {spmd.recomputed}
// CHECK-NEXT: %[[T2:.*]] = spmd.tanh %[[E2]] {spmd.recomputed}
// tanh' = 1 - tanh^2 and exp' = exp, on the recomputed values only:
// CHECK-NEXT: %[[SQ:.*]] = spmd.mul %[[T2]], %[[T2]]
// CHECK-NEXT: %[[D:.*]] = spmd.sub %{{.*}}, %[[SQ]]
// CHECK-NEXT: %[[DT:.*]] = spmd.mul %arg0, %[[D]]
// CHECK-NEXT: %[[DE:.*]] = spmd.mul %[[DT]], %[[E2]]
// The mul after the segment reads the stored output in its VJP (d/da of t * a = t).
// CHECK-NEXT: %[[G:.*]] = spmd.add %[[T]], %[[DE]]
// CHECK-NEXT: return %[[L]], %[[G]]
func.func @remat(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %e = spmd.exp %a {spmd.remat = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %t = spmd.tanh %e {spmd.remat = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %m = spmd.mul %t, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %m {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// Two segments: each is recomputed where the sweep reaches it (the later one first), each from
// its own stored input.
// CHECK-LABEL: func.func @two_segments
// CHECK: %[[A1:.*]] = spmd.exp %arg0 {spmd.remat = 0 : i64}
// CHECK-NEXT: %[[B1:.*]] = spmd.exp %[[A1]] {spmd.remat = 1 : i64}
// CHECK-NEXT: spmd.reduce_sum %[[B1]]
// CHECK-NEXT: %[[B2:.*]] = spmd.exp %[[A1]] {spmd.recomputed}
// CHECK-NEXT: %[[A2:.*]] = spmd.exp %arg0 {spmd.recomputed}
// CHECK-NEXT: %[[G:.*]] = spmd.mul %[[B2]], %[[A2]]
// CHECK-NEXT: return %{{.*}}, %[[G]]
func.func @two_segments(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %e = spmd.exp %a {spmd.remat = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %f = spmd.exp %e {spmd.remat = 1 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %f {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}
