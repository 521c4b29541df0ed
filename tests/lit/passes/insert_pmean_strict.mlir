// spmd-insert-pmean{strict}: each pmean the pass would insert is an error naming the output and
// pointing at the value's source line; integer outputs that vary are errors in any mode.
// RUN: spmd-opt %s --spmd-insert-pmean=strict --split-input-file --verify-diagnostics

func.func @gradient(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped})
    -> (tensor<3xf32> {spmd.name = "params.w"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{spmd-insert-pmean (strict): replicated output 0 ('params.w') depends on the gradient of replicated parameter #0 of this value_and_grad, which varies across axis 'batch' (it is computed from mapped data); average it with spmd::pmean(grads, "batch") or return the output mapped (out_axes)}}
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %t = spmd.mul %p, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  %nw = spmd.sub %w, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %nw : tensor<3xf32>
}

// -----

func.func @loss(%x: tensor<3xf32> {spmd.mapped}) -> (tensor<f32> {spmd.name = "loss"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{spmd-insert-pmean (strict): replicated output 0 ('loss') varies across axis 'batch' (it is computed from mapped data); average it with spmd::pmean(value, "batch") or return it mapped (out_axes)}}
  %s = spmd.reduce_sum %x {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @integer(%x: tensor<3xf32> {spmd.mapped}) -> tensor<i32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{spmd-insert-pmean: replicated output 0 is an integer tensor that varies across axis 'batch'; averaging would truncate it, so sum it yourself (spmd::psum) or return it mapped (out_axes)}}
  %i = spmd.argmax %x {axis = 0 : i64} : (tensor<3xf32>) -> tensor<i32>
  return %i : tensor<i32>
}

// -----

// Invariant outputs pass strict mode.
func.func @already_invariant(%x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %m = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  return %m : tensor<3xf32>
}
