// spmd-replication: ops whose results vary across the mapped axis get `spmd.varying`; values
// computed only from replicated arguments, or made invariant by all_reduce/all_gather, do not.
// RUN: spmd-opt %s --spmd-replication | FileCheck %s

// CHECK-LABEL: func.func @classes
func.func @classes(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped})
    -> (tensor<3xf32>, tensor<2x3xf32>, tensor<i32>, tensor<3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK: spmd.exp %arg0 :
  %a = spmd.exp %w : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.mul %{{.*}}, %arg1 {spmd.varying}
  %b = spmd.mul %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.all_reduce %{{.*}} {axis_name = "batch", reduction = #spmd.reduction<sum>} :
  %c = spmd.all_reduce %b {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.add %{{.*}}, %{{.*}} : (tensor<3xf32>
  %d = spmd.add %c, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.all_gather %{{.*}} {axis_name = "batch", axis_size = 2 : i64} :
  %e = spmd.all_gather %b {axis_name = "batch", axis_size = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: spmd.axis_index {axis_name = "batch", spmd.varying}
  %i = spmd.axis_index {axis_name = "batch"} : tensor<i32>
  // CHECK: spmd.reduce_scatter %{{.*}} {axis_name = "batch", spmd.varying}
  %r = spmd.reduce_scatter %e {axis_name = "batch"} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %d, %e, %i, %r : tensor<3xf32>, tensor<2x3xf32>, tensor<i32>, tensor<3xf32>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped})
    -> (tensor<f32>, tensor<3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // A body reading mapped data makes the loss and the gradient vary.
  // CHECK: spmd.value_and_grad
  // CHECK: } {spmd.varying}
  %l, %g = spmd.value_and_grad %w {
  ^bb0(%p: tensor<3xf32>):
    %t = spmd.mul %p, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } : (tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>)
  return %l, %g : tensor<f32>, tensor<3xf32>
}

// Functions that are not mapped get no marks.
// CHECK-LABEL: func.func @not_mapped
func.func @not_mapped(%x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32> {
  // CHECK: spmd.exp %arg0 :
  %t = spmd.exp %x : (tensor<3xf32>) -> tensor<3xf32>
  return %t : tensor<3xf32>
}

// A custom_vjp's results follow its forward function's yields: invariant inputs, but forward
// adds the replica's index.
// CHECK-LABEL: func.func @custom_vjp
func.func @custom_vjp(%w: tensor<f32>) -> tensor<f32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK: spmd.custom_vjp
  // CHECK: } {spmd.varying}
  %y = spmd.custom_vjp %w {
  ^bb0(%x: tensor<f32>):
    %i = spmd.axis_index {axis_name = "batch"} : tensor<i32>
    %f = spmd.convert %i : (tensor<i32>) -> tensor<f32>
    %s = spmd.add %x, %f : (tensor<f32>, tensor<f32>) -> tensor<f32>
    spmd.yield %s : tensor<f32>
  } {
  ^bb0(%c: tensor<f32>):
    spmd.yield %c : tensor<f32>
  } : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

// An all_reduce within replica groups is invariant within each group only: it varies where its
// operand does, and not where its operand is replicated.
// CHECK-LABEL: func.func @within_groups
func.func @within_groups(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped}) -> (tensor<3xf32>, tensor<3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // CHECK: spmd.all_reduce %arg1 {axis_name = "batch", group_size = 2 : i64, reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>, spmd.varying}
  %a = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.all_reduce %arg0 {axis_name = "batch", group_size = 2 : i64, reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>} :
  %b = spmd.all_reduce %w {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  return %a, %b : tensor<3xf32>, tensor<3xf32>
}
