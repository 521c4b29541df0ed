// spmd-insert-pmean on a small data-parallel step (dense layer + BatchNorm, SGD update):
// exactly one pmean per gradient (right after value_and_grad, before the update), one on the
// loss and one on each BatchNorm running statistic (just before the return); none where the
// user already wrote the collective, or for mapped outputs.
// RUN: spmd-opt %s --spmd-insert-pmean --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @step
func.func @step(%w: tensor<4x3xf32>, %scale: tensor<3xf32>, %rmean: tensor<3xf32>,
                %x: tensor<8x4xf32> {spmd.mapped}, %y: tensor<8xi32> {spmd.mapped})
    -> (tensor<4x3xf32> {spmd.name = "params.w"}, tensor<3xf32> {spmd.name = "params.scale"},
        tensor<3xf32> {spmd.name = "state.running_mean"}, tensor<f32> {spmd.name = "loss"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  %lr = spmd.constant dense<0.1> : tensor<4x3xf32>
  %lr1 = spmd.constant dense<0.1> : tensor<3xf32>
  %m = spmd.constant dense<0.9> : tensor<3xf32>
  // CHECK: %[[VG:.*]]:4 = spmd.value_and_grad
  %loss, %bmean, %gw, %gs = spmd.value_and_grad %w, %scale {
  ^bb0(%pw: tensor<4x3xf32>, %ps: tensor<3xf32>):
    %h = spmd.matmul %x, %pw : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
    %h4 = spmd.reshape %h : (tensor<8x3xf32>) -> tensor<8x3x1x1xf32>
    %zero = spmd.constant dense<0.0> : tensor<3xf32>
    %n, %bm, %bv = spmd.batch_norm_train %h4, %ps, %zero {epsilon = 1.0e-5 : f64}
        : (tensor<8x3x1x1xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<8x3x1x1xf32>, tensor<3xf32>, tensor<3xf32>)
    %logits = spmd.reshape %n : (tensor<8x3x1x1xf32>) -> tensor<8x3xf32>
    %ce = spmd.softmax_cross_entropy %logits, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<8xf32>
    %l = spmd.reduce_mean %ce {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
    spmd.yield %l, %bm : tensor<f32>, tensor<3xf32>
  } : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<4x3xf32>, tensor<3xf32>)
  // One pmean per gradient, right after value_and_grad and before the update:
  // CHECK: } {spmd.varying}
  // CHECK-NEXT: %[[GW:.*]] = spmd.all_reduce %[[VG]]#2 {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // CHECK-NEXT: %[[GS:.*]] = spmd.all_reduce %[[VG]]#3 {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // CHECK-NEXT: spmd.mul %{{.*}}, %[[GW]]
  %sw = spmd.mul %lr, %gw : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %nw = spmd.sub %w, %sw : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %ss = spmd.mul %lr1, %gs : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %ns = spmd.sub %scale, %ss : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %a = spmd.mul %m, %rmean : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %b = spmd.mul %lr1, %bmean : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nr = spmd.add %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // The running statistic and the loss get theirs just before the return:
  // CHECK: %[[NR:.*]] = spmd.add
  // CHECK-NEXT: %[[R:.*]] = spmd.all_reduce %[[NR]] {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // CHECK-NEXT: %[[L:.*]] = spmd.all_reduce %[[VG]]#0 {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[R]], %[[L]]
  return %nw, %ns, %nr, %loss : tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// The user averaged the gradient and the loss: nothing is inserted.
// CHECK-LABEL: func.func @user_wrote_pmean
func.func @user_wrote_pmean(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped})
    -> (tensor<3xf32>, tensor<f32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %t = spmd.mul %p, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  // CHECK: spmd.all_reduce %{{.*}}#1 {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // CHECK-NEXT: spmd.all_reduce %{{.*}}#0 {axis_name = "batch", reduction = #spmd.reduction<sum>}
  // CHECK-NEXT: return
  %ga = spmd.all_reduce %g {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  %la = spmd.all_reduce %l {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<f32>) -> tensor<f32>
  return %ga, %la : tensor<3xf32>, tensor<f32>
}

// -----

// Mapped outputs may vary: nothing is inserted.
// CHECK-LABEL: func.func @mapped_output
func.func @mapped_output(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped})
    -> (tensor<3xf32> {spmd.mapped})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK-NOT: spmd.all_reduce
  %t = spmd.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %t : tensor<3xf32>
}

// -----

// Functions that are not mapped are left alone.
// CHECK-LABEL: func.func @not_mapped
func.func @not_mapped(%x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32> {
  // CHECK-NOT: spmd.all_reduce
  %t = spmd.exp %x : (tensor<3xf32>) -> tensor<3xf32>
  return %t : tensor<3xf32>
}
