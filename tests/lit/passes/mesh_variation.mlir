// spmd-replication on a mesh function (spmd::shardMap's): each op whose results vary over some
// mesh axes gets `spmd.varies_over` with those axes (passes/MeshVariation.h); arguments start
// from their specs' axes, a collective the frontend composed over a mesh axis keeps its
// `spmd.mesh_varies`, and a gradient varies only over what its derivative is built from.
// RUN: spmd-opt %s --spmd-replication | FileCheck %s

// CHECK-LABEL: func.func @axes
func.func @axes(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["data"]},
                %m: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["model"]}, %u: tensor<3xf32> {spmd.mapped},
                %one: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["single"]})
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<i32>)
    attributes {spmd.axis_name = "mesh", spmd.axis_size = 4 : i64,
                spmd.mesh_axes = ["data", "model", "single"], spmd.mesh_shape = array<i64: 2, 2, 1>} {
  // Replicated arguments vary over nothing.
  // CHECK: spmd.exp %arg0 :
  %a = spmd.exp %w : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.mul %{{.*}}, %arg1 {spmd.varies_over = ["data"], spmd.varying}
  %b = spmd.mul %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // The union of the operands' axes.
  // CHECK: spmd.add %{{.*}}, %arg2 {spmd.varies_over = ["data", "model"], spmd.varying}
  %c = spmd.add %b, %m : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  // A composed psum over "model" (its last op marked by the frontend) leaves "data".
  // CHECK: spmd.neg %{{.*}} {spmd.mesh_varies = ["data"], spmd.varying}
  %d = spmd.neg %c {spmd.mesh_varies = ["data"]} : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.sqrt %{{.*}} {spmd.varies_over = ["data"], spmd.varying}
  %e = spmd.sqrt %d : (tensor<3xf32>) -> tensor<3xf32>
  // A mapped argument without a spec's axes varies over every axis; a size-1 axis never varies.
  // CHECK: spmd.exp %arg3 {spmd.varies_over = ["data", "model"], spmd.varying}
  %f = spmd.exp %u : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.exp %arg4 {spmd.varying}
  %g = spmd.exp %one : (tensor<3xf32>) -> tensor<3xf32>
  // The whole mesh's axis: all_reduce makes a value invariant everywhere, axis_index varies everywhere.
  // CHECK: spmd.all_reduce %{{.*}} {axis_name = "mesh", reduction = #spmd.reduction<sum>} :
  %h = spmd.all_reduce %c {axis_name = "mesh", reduction = #spmd.reduction<sum>} : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.axis_index {axis_name = "mesh", spmd.varies_over = ["data", "model"], spmd.varying}
  %i = spmd.axis_index {axis_name = "mesh"} : tensor<i32>
  return %a, %e, %f, %g, %h, %i : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<i32>
}

// CHECK-LABEL: func.func @gradients
func.func @gradients(%w: tensor<3xf32>, %v: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["model"]},
                     %x: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["data"]})
    -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>)
    attributes {spmd.axis_name = "mesh", spmd.axis_size = 4 : i64,
                spmd.mesh_axes = ["data", "model"], spmd.mesh_shape = array<i64: 2, 2>} {
  // The loss reads both; w's derivative is built from x alone (data); v's from v (model) and
  // what the ops depending on v read, the data-varying term the add joins (data: the rule does
  // not look inside an op's derivative).
  // CHECK: spmd.value_and_grad
  // CHECK: spmd.mul %{{.*}}, %arg2 {spmd.varies_over = ["data"], spmd.varying}
  // CHECK: } {spmd.varies_over = ["data", "model"], spmd.varying}
  %l, %gw, %gv = spmd.value_and_grad %w, %v {
  ^bb0(%p: tensor<3xf32>, %q: tensor<3xf32>):
    %t = spmd.mul %p, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
    %r = spmd.reduce_sum %q {axes = array<i64: 0>, spmd.mesh_varies = []} : (tensor<3xf32>) -> tensor<f32>
    %sum = spmd.add %s, %r : (tensor<f32>, tensor<f32>) -> tensor<f32>
    spmd.yield %sum : tensor<f32>
  } : (tensor<3xf32>, tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: spmd.exp %{{.*}}#1 {spmd.varies_over = ["data"], spmd.varying}
  %ew = spmd.exp %gw : (tensor<3xf32>) -> tensor<3xf32>
  // CHECK: spmd.exp %{{.*}}#2 {spmd.varies_over = ["data", "model"], spmd.varying}
  %ev = spmd.exp %gv : (tensor<3xf32>) -> tensor<3xf32>
  return %l, %ew, %ev : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// Without spmd.mesh_axes: no per-axis marks.
// CHECK-LABEL: func.func @one_axis
func.func @one_axis(%x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK: spmd.exp %arg0 {spmd.varying}
  %t = spmd.exp %x : (tensor<3xf32>) -> tensor<3xf32>
  return %t : tensor<3xf32>
}

// A custom_vjp's results take the axes of its forward's yields (here the argument's "model"
// joined with a value varying over "data" that forward reads from outside).
// CHECK-LABEL: func.func @custom_vjp
func.func @custom_vjp(%w: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["model"]},
                      %x: tensor<3xf32> {spmd.mapped, spmd.mesh_varies = ["data"]}) -> tensor<3xf32>
    attributes {spmd.axis_name = "mesh", spmd.axis_size = 4 : i64,
                spmd.mesh_axes = ["data", "model"], spmd.mesh_shape = array<i64: 2, 2>} {
  // CHECK: spmd.custom_vjp
  // CHECK: spmd.mul %{{.*}}, %arg1 {spmd.varies_over = ["data", "model"], spmd.varying}
  // CHECK: } {spmd.varies_over = ["data", "model"], spmd.varying}
  %y = spmd.custom_vjp %w {
  ^bb0(%a: tensor<3xf32>):
    %m = spmd.mul %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    spmd.yield %m : tensor<3xf32>
  } {
  ^bb0(%c: tensor<3xf32>):
    spmd.yield %c : tensor<3xf32>
  } : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// Within replica groups (a transpose the frontend did not mark): a reduce_scatter or all_to_all
// varies where its operand does and over the axes its groups span, here "model" ({0, 1} and
// {2, 3} of the row-major 2 x 2 mesh) or "data" ({0, 2} and {1, 3}), not over every axis.
// CHECK-LABEL: func.func @groups
func.func @groups(%w: tensor<4x3xf32>, %x: tensor<2x3xf32> {spmd.mapped, spmd.mesh_varies = ["data"]})
    -> (tensor<2x6xf32>, tensor<3xf32>, tensor<2x6xf32>)
    attributes {spmd.axis_name = "mesh", spmd.axis_size = 4 : i64,
                spmd.mesh_axes = ["data", "model"], spmd.mesh_shape = array<i64: 2, 2>} {
  // CHECK: spmd.all_to_all %arg0 {{.*}}spmd.varies_over = ["model"], spmd.varying}
  %a = spmd.all_to_all %w {axis_name = "mesh", axis_size = 2 : i64, split_axis = 0 : i64, concat_axis = 1 : i64, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x6xf32>
  // CHECK: spmd.reduce_scatter %arg1 {{.*}}spmd.varies_over = ["data", "model"], spmd.varying}
  %b = spmd.reduce_scatter %x {axis_name = "mesh", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
  // CHECK: spmd.all_to_all %arg0 {{.*}}spmd.varies_over = ["data"], spmd.varying}
  %c = spmd.all_to_all %w {axis_name = "mesh", axis_size = 2 : i64, split_axis = 0 : i64, concat_axis = 1 : i64, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<4x3xf32>) -> tensor<2x6xf32>
  return %a, %b, %c : tensor<2x6xf32>, tensor<3xf32>, tensor<2x6xf32>
}
