// Errors of value_and_grad and the autodiff pass name the op and its source line.
// RUN: spmd-opt %s --spmd-autodiff --split-input-file --verify-diagnostics

func.func @non_scalar_loss(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  // expected-error @+1 {{the loss (first yielded value) must be a scalar float tensor, got 'tensor<3xf32>'}}
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %e = spmd.exp %a : (tensor<3xf32>) -> tensor<3xf32>
    spmd.yield %e : tensor<3xf32>
  } : (tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return %l, %g : tensor<3xf32>, tensor<3xf32>
}

// -----

func.func @wrong_result_types(%x: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{results must be the yielded values' types then the primals' types (2 in all)}}
  %l = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %s = spmd.reduce_sum %a {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A gradient through a backward op (grad of grad) is refused at that op.
func.func @second_order(%dy: tensor<2x4xf32>, %y: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>) {
  %l, %g = spmd.value_and_grad %dy {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{spmd-autodiff: cannot differentiate spmd.relu_backward: it is a backward op, and second derivatives (grad of grad) are not supported}}
    %r = spmd.relu_backward %a, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %s = spmd.reduce_sum %r {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>)
  return %l, %g : tensor<f32>, tensor<2x4xf32>
}

// -----

// A custom_vjp's backward must yield one cotangent per input, of the input's type.
func.func @custom_vjp_backward_types(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{backward must yield one cotangent per input, of the input's type (1)}}
  %y = spmd.custom_vjp %x {
  ^bb0(%a: tensor<3xf32>):
    spmd.yield %a : tensor<3xf32>
  } {
  ^bb0(%c: tensor<3xf32>):
    %s = spmd.reduce_sum %c {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

// Forward reads a value that depends on the differentiated input without taking it as an
// input: its gradient would be lost, so the sweep refuses it.
func.func @custom_vjp_captures(%w: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %e = spmd.exp %p : (tensor<3xf32>) -> tensor<3xf32>
    %k = spmd.constant dense<1.0> : tensor<3xf32>
    // expected-error @+1 {{the forward function of this customVjp reads a value from outside its arguments that depends on what is differentiated}}
    %y = spmd.custom_vjp %k {
    ^bb0(%x: tensor<3xf32>):
      %m = spmd.mul %x, %e : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      spmd.yield %m : tensor<3xf32>
    } {
    ^bb0(%c: tensor<3xf32>):
      spmd.yield %c : tensor<3xf32>
    } : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// -----

// The relu form of a convolution (spmd-fuse-relu's, made after autodiff) has no VJP.
func.func @conv_relu(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x1x1xf32>) -> (tensor<f32>, tensor<1x1x3x3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<1x1x3x3xf32>):
    // expected-error @+1 {{'spmd.conv2d' op with relu has no VJP: spmd-fuse-relu makes this form after autodiff; write conv2d followed by relu instead}}
    %y = spmd.conv2d %a, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, relu = true} : (tensor<1x1x3x3xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x1x3x3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<1x1x3x3xf32>) -> (tensor<f32>, tensor<1x1x3x3xf32>)
  return %l, %g : tensor<f32>, tensor<1x1x3x3xf32>
}
