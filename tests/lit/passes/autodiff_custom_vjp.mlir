// spmd-autodiff on spmd.custom_vjp: the forward region is inlined where the op was, and the
// reverse sweep copies the backward region (residuals and the result's cotangent in) instead of
// the VJP rules of the forward's ops; where no gradient is taken only the forward is inlined.
// RUN: spmd-opt %s --spmd-autodiff | FileCheck %s

// CHECK-LABEL: func.func @custom
func.func @custom(%w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  // CHECK-NOT: spmd.custom_vjp
  // Forward: exp(w), residual exp(w).
  // CHECK: %[[E:.*]] = spmd.exp %arg0
  // CHECK: %[[S:.*]] = spmd.reduce_sum %[[E]]
  // Backward: g * 2 * residual (not exp's rule, g * exp(w), which would read no constant 2).
  // CHECK: %[[G:.*]] = spmd.broadcast_in_dim
  // CHECK: %[[TWO:.*]] = spmd.constant dense<2.000000e+00>
  // CHECK: %[[T:.*]] = spmd.mul %[[G]], %[[TWO]]
  // CHECK: %[[D:.*]] = spmd.mul %[[T]], %[[E]]
  // CHECK: return %[[S]], %[[D]]
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %y = spmd.custom_vjp %p {
    ^bb0(%x: tensor<3xf32>):
      %e = spmd.exp %x : (tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %e, %e : tensor<3xf32>, tensor<3xf32>
    } {
    ^bb0(%r: tensor<3xf32>, %c: tensor<3xf32>):
      %two = spmd.constant dense<2.0> : tensor<3xf32>
      %t = spmd.mul %c, %two : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %d = spmd.mul %t, %r : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %d : tensor<3xf32>
    } : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @no_gradient
func.func @no_gradient(%w: tensor<3xf32>) -> tensor<3xf32> {
  // CHECK-NEXT: %[[E:.*]] = spmd.exp %arg0
  // CHECK-NEXT: return %[[E]]
  %y = spmd.custom_vjp %w {
  ^bb0(%x: tensor<3xf32>):
    %e = spmd.exp %x : (tensor<3xf32>) -> tensor<3xf32>
    spmd.yield %e, %e : tensor<3xf32>, tensor<3xf32>
  } {
  ^bb0(%r: tensor<3xf32>, %c: tensor<3xf32>):
    spmd.yield %c : tensor<3xf32>
  } : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// Inside a checkpoint segment (the forward's ops carry spmd.remat): the backward reads the
// residual's recomputed copy, not the forward value.
// CHECK-LABEL: func.func @remat
func.func @remat(%w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  // CHECK: %[[E:.*]] = spmd.exp %arg0 {spmd.remat = 0 : i64}
  // CHECK: %[[S:.*]] = spmd.reduce_sum %[[E]]
  // CHECK: %[[E2:.*]] = spmd.exp %arg0 {spmd.recomputed}
  // CHECK: %[[D:.*]] = spmd.mul %{{.*}}, %[[E2]]
  // CHECK: return %[[S]], %[[D]]
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %y = spmd.custom_vjp %p {
    ^bb0(%x: tensor<3xf32>):
      %e = spmd.exp %x {spmd.remat = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %e, %e : tensor<3xf32>, tensor<3xf32>
    } {
    ^bb0(%r: tensor<3xf32>, %c: tensor<3xf32>):
      %d = spmd.mul %c, %r : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %d : tensor<3xf32>
    } {spmd.remat = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// A custom_vjp inside another's forward: the outer backward stands for both (the inner's
// backward, which would add a constant 5, is never copied).
// CHECK-LABEL: func.func @nested
func.func @nested(%w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  // CHECK-NOT: spmd.custom_vjp
  // CHECK-NOT: dense<5.0
  // CHECK: %[[E:.*]] = spmd.exp %arg0
  // CHECK: %[[T:.*]] = spmd.tanh %[[E]]
  // CHECK: %[[S:.*]] = spmd.reduce_sum %[[T]]
  // CHECK: %[[G:.*]] = spmd.broadcast_in_dim
  // CHECK: %[[D:.*]] = spmd.mul %[[G]], %[[T]]
  // CHECK: return %[[S]], %[[D]]
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %y = spmd.custom_vjp %p {
    ^bb0(%x: tensor<3xf32>):
      %inner = spmd.custom_vjp %x {
      ^bb0(%a: tensor<3xf32>):
        %e = spmd.exp %a : (tensor<3xf32>) -> tensor<3xf32>
        spmd.yield %e : tensor<3xf32>
      } {
      ^bb0(%c: tensor<3xf32>):
        %five = spmd.constant dense<5.0> : tensor<3xf32>
        %d = spmd.add %c, %five : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
        spmd.yield %d : tensor<3xf32>
      } : (tensor<3xf32>) -> tensor<3xf32>
      %t = spmd.tanh %inner : (tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %t, %t : tensor<3xf32>, tensor<3xf32>
    } {
    ^bb0(%r: tensor<3xf32>, %c: tensor<3xf32>):
      %d = spmd.mul %c, %r : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %d : tensor<3xf32>
    } : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}
