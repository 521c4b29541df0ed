// --spmd-autodiff replaces spmd.value_and_grad with the body's forward ops followed by the
// reverse sweep of their VJP rules; gradients reaching a value along several uses are summed.
// RUN: spmd-opt %s --spmd-autodiff | FileCheck %s
// RUN: spmd-opt %s --spmd-autodiff --canonicalize --cse | FileCheck %s --check-prefix=CLEAN

// x*x used twice: two cotangent contributions are added.
// CHECK-LABEL: func.func @square_sum
// CHECK-NOT: spmd.value_and_grad
// CHECK: %[[SQ:.*]] = spmd.mul %arg0, %arg0
// CHECK: %[[L:.*]] = spmd.reduce_sum %[[SQ]]
// CHECK: %[[ONE:.*]] = spmd.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DY:.*]] = spmd.broadcast_in_dim %[[ONE]] {dims = array<i64>} : (tensor<f32>) -> tensor<3xf32>
// CHECK: %[[A:.*]] = spmd.mul %[[DY]], %arg0
// CHECK: %[[B:.*]] = spmd.mul %[[DY]], %arg0
// CHECK: %[[G:.*]] = spmd.add %[[A]], %[[B]]
// CHECK: return %[[L]], %[[G]]
// CLEAN-LABEL: func.func @square_sum
// CLEAN: spmd.reduce_sum
// The seed's multiply by 1 folds away: d/dx sum(x * x) = x + x.
// CLEAN: %[[G:.*]] = spmd.add %arg0, %arg0
func.func @square_sum(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %sq = spmd.mul %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %sq {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// A linear classifier: matmul (transposed weight, bias) and softmax cross-entropy. The captured
// input %x and integer labels get no gradient; the weight gradient is dlogits^T x.
// CHECK-LABEL: func.func @dense
// CHECK: %[[LOGITS:.*]] = spmd.matmul %arg0, %arg1, %arg2 {transpose_rhs = true}
// CHECK: %[[DL:.*]] = spmd.softmax_cross_entropy_backward %[[LOGITS]], %arg3, %{{.*}}
// CHECK-DAG: %[[DW:.*]] = spmd.matmul %[[DL]], %arg0 {transpose_lhs = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
// CHECK-DAG: %[[DB:.*]] = spmd.reduce_sum %[[DL]] {axes = array<i64: 0>} : (tensor<4x5xf32>) -> tensor<5xf32>
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
// CLEAN-LABEL: func.func @dense
// CLEAN-NOT: spmd.matmul %{{.*}}, %arg1 {
func.func @dense(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>, %b: tensor<5xf32>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<5x3xf32>, tensor<5xf32>) {
  %l, %gw, %gb = spmd.value_and_grad %w, %b {
  ^bb0(%pw: tensor<5x3xf32>, %pb: tensor<5xf32>):
    %logits = spmd.matmul %x, %pw, %pb {transpose_rhs = true} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
    %ce = spmd.softmax_cross_entropy %logits, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<4xf32>
    %m = spmd.reduce_mean %ce {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    spmd.yield %m : tensor<f32>
  } : (tensor<5x3xf32>, tensor<5xf32>) -> (tensor<f32>, tensor<5x3xf32>, tensor<5xf32>)
  return %l, %gw, %gb : tensor<f32>, tensor<5x3xf32>, tensor<5xf32>
}

// conv -> batch norm -> relu with the batch statistics yielded as aux: the backward ops appear
// in reverse order, the aux values pass through, and a primal the loss ignores gets zeros.
// CHECK-LABEL: func.func @conv_bn_relu
// CHECK: %[[Y:.*]] = spmd.conv2d
// CHECK: %[[N:.*]], %[[MEAN:.*]], %[[VAR:.*]] = spmd.batch_norm_train %[[Y]]
// CHECK: %[[R:.*]] = spmd.relu %[[N]]
// CHECK: %[[DR:.*]] = spmd.relu_backward %{{.*}}, %[[R]]
// CHECK: %[[DX:.*]], %[[DS:.*]], %[[DO:.*]] = spmd.batch_norm_train_backward %[[DR]], %[[Y]], %arg2, %[[MEAN]], %[[VAR]] {epsilon = 1.000000e-05 : f64}
// CHECK-DAG: spmd.conv2d_backward_data %[[DX]], %arg1 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x6x6xf32>
// CHECK-DAG: %[[DW:.*]] = spmd.conv2d_backward_filter %arg0, %[[DX]]
// CHECK: %[[ZERO:.*]] = spmd.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: return %{{.*}}, %[[MEAN]], %[[DW]], %[[DS]], %[[DO]], %[[ZERO]]
// CLEAN-LABEL: func.func @conv_bn_relu
// CLEAN-NOT: spmd.conv2d_backward_data
func.func @conv_bn_relu(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %s: tensor<4xf32>, %o: tensor<4xf32>, %unused: tensor<4xf32>)
    -> (tensor<f32>, tensor<4xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %l, %mean, %gw, %gs, %go, %gu = spmd.value_and_grad %w, %s, %o, %unused {
  ^bb0(%pw: tensor<4x3x3x3xf32>, %ps: tensor<4xf32>, %po: tensor<4xf32>, %pu: tensor<4xf32>):
    %y = spmd.conv2d %x, %pw {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
    %n:3 = spmd.batch_norm_train %y, %ps, %po {epsilon = 1.0e-05 : f64} : (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x6x6xf32>, tensor<4xf32>, tensor<4xf32>)
    %r = spmd.relu %n#0 : (tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
    %sum = spmd.reduce_sum %r {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x6x6xf32>) -> tensor<f32>
    spmd.yield %sum, %n#1 : tensor<f32>, tensor<4xf32>
  } : (tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %l, %mean, %gw, %gs, %go, %gu : tensor<f32>, tensor<4xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// A convolution's bias gradient comes first, so that it reads dy while dy is still in cache;
// then the data and filter gradients, the results in the operands' order.
// CHECK-LABEL: func.func @conv_bias
// CHECK: %[[DB:.*]] = spmd.reduce_sum %[[DY:[^ ]*]] {axes = array<i64: 0, 2, 3>}
// CHECK-NEXT: spmd.conv2d_backward_data %[[DY]], %arg1
// CHECK-NEXT: %[[DW:.*]] = spmd.conv2d_backward_filter %arg0, %[[DY]]
// CHECK: return %{{.*}}, %[[DW]], %[[DB]]
func.func @conv_bias(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>)
    -> (tensor<f32>, tensor<4x3x3x3xf32>, tensor<4xf32>) {
  %l, %gw, %gb = spmd.value_and_grad %w, %b {
  ^bb0(%pw: tensor<4x3x3x3xf32>, %pb: tensor<4xf32>):
    %y = spmd.conv2d %x, %pw, %pb {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
    %sq = spmd.mul %y, %y : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
    %sum = spmd.reduce_sum %sq {axes = array<i64: 0, 1, 2, 3>} : (tensor<2x4x6x6xf32>) -> tensor<f32>
    spmd.yield %sum : tensor<f32>
  } : (tensor<4x3x3x3xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4x3x3x3xf32>, tensor<4xf32>)
  return %l, %gw, %gb : tensor<f32>, tensor<4x3x3x3xf32>, tensor<4xf32>
}

// argmax is marked ZeroGradient: its integer result used as labels sends nothing back, so the
// only gradient is the one through the logits.
// CHECK-LABEL: func.func @argmax_labels
// CHECK: %[[I:.*]] = spmd.argmax %arg0
// CHECK: %[[G:.*]] = spmd.softmax_cross_entropy_backward %arg0, %[[I]], %{{.*}}
// CHECK: return %{{.*}}, %[[G]]
func.func @argmax_labels(%x: tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<2x3xf32>):
    %i = spmd.argmax %a {axis = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi32>
    %ce = spmd.softmax_cross_entropy %a, %i : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<2xf32>
    %s = spmd.reduce_sum %ce {axes = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<2x3xf32>) -> (tensor<f32>, tensor<2x3xf32>)
  return %l, %g : tensor<f32>, tensor<2x3xf32>
}

// ppermute's VJP sends the cotangent back along the inverted pairs (a ring 0->1->2->0 over 3
// replicas goes back 1->0, 2->1, 0->2; replica 3 received nothing, so it sends nothing back).
// CHECK-LABEL: func.func @ppermute_ring
// CHECK: %[[Y:.*]] = spmd.ppermute %arg0 {axis_name = "batch", pairs = array<i64: 0, 1, 1, 2, 2, 0>}
// CHECK: spmd.ppermute %{{.*}} {axis_name = "batch", pairs = array<i64: 1, 0, 2, 1, 0, 2>}
func.func @ppermute_ring(%x: tensor<3xf32> {spmd.mapped}) -> (tensor<f32>, tensor<3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %y = spmd.ppermute %a {axis_name = "batch", pairs = array<i64: 0, 1, 1, 2, 2, 0>} : (tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// all_to_all's VJP is the all_to_all with split and concat axes swapped.
// CHECK-LABEL: func.func @all_to_all
// CHECK: spmd.all_to_all %arg0 {axis_name = "batch", axis_size = 2 : i64, concat_axis = 1 : i64, split_axis = 0 : i64} : (tensor<4x3xf32>) -> tensor<2x6xf32>
// CHECK: spmd.all_to_all %{{.*}} {axis_name = "batch", axis_size = 2 : i64, concat_axis = 0 : i64, split_axis = 1 : i64} : (tensor<2x6xf32>) -> tensor<4x3xf32>
func.func @all_to_all(%x: tensor<4x3xf32> {spmd.mapped}) -> (tensor<f32>, tensor<4x3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<4x3xf32>):
    %y = spmd.all_to_all %a {axis_name = "batch", axis_size = 2 : i64, split_axis = 0 : i64, concat_axis = 1 : i64} : (tensor<4x3xf32>) -> tensor<2x6xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<2x6xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<4x3xf32>) -> (tensor<f32>, tensor<4x3xf32>)
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}

// Within replica groups the transpose keeps the groups.
// CHECK-LABEL: func.func @all_to_all_within_groups
// CHECK: spmd.all_to_all %{{.*}} {axis_name = "batch", axis_size = 2 : i64, concat_axis = 0 : i64, group_size = 2 : i64, replica_groups = array<i64: 0, 2, 1, 3>, split_axis = 1 : i64} : (tensor<2x6xf32>) -> tensor<4x3xf32>
func.func @all_to_all_within_groups(%x: tensor<4x3xf32> {spmd.mapped}) -> (tensor<f32>, tensor<4x3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<4x3xf32>):
    %y = spmd.all_to_all %a {axis_name = "batch", axis_size = 2 : i64, split_axis = 0 : i64, concat_axis = 1 : i64, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x6xf32>
    %s = spmd.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<2x6xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<4x3xf32>) -> (tensor<f32>, tensor<4x3xf32>)
  return %l, %g : tensor<f32>, tensor<4x3xf32>
}

// stop_gradient: the held operand of x * stop_gradient(x) gets no cotangent, so the gradient
// is x (one contribution, not x + x); the canonicalizer then folds the op to its input.
// CHECK-LABEL: func.func @held
// CHECK: %[[H:.*]] = spmd.stop_gradient %arg0
// CHECK: %[[P:.*]] = spmd.mul %arg0, %[[H]]
// CHECK: %[[DY:.*]] = spmd.broadcast_in_dim
// CHECK: %[[G:.*]] = spmd.mul %[[DY]], %[[H]]
// CHECK-NOT: spmd.add
// CHECK: return %{{.*}}, %[[G]]
// CLEAN-LABEL: func.func @held
// CLEAN-NOT: spmd.stop_gradient
// CLEAN: %[[P:.*]] = spmd.mul %arg0, %arg0
// CLEAN: %[[L:.*]] = spmd.reduce_sum %[[P]]
// CLEAN: return %[[L]], %arg0
func.func @held(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<3xf32>):
    %h = spmd.stop_gradient %a : (tensor<3xf32>) -> tensor<3xf32>
    %p = spmd.mul %a, %h : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %p {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}
