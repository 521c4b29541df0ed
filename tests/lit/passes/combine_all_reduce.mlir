// spmd-combine-all-reduce: the per-gradient all_reduces of a step become one all_reduce over
// all of them (a flat buffer at run time), in the order the gradients are produced, placed right
// after the last one is computed; bucket-bytes splits them, and every bucket (one of one
// gradient too) sits right after its last gradient; an all_reduce whose result is needed
// before a later gradient exists stays separate.
// RUN: spmd-opt %s --spmd-combine-all-reduce --split-input-file | FileCheck %s
// RUN: spmd-opt %s --spmd-combine-all-reduce=bucket-bytes=64 --split-input-file | FileCheck %s --check-prefix=SMALL

// CHECK-LABEL: func.func @gradients
// SMALL-LABEL: func.func @gradients
func.func @gradients(%x: tensor<16xf32>, %y: tensor<8xf32>, %z: tensor<4xf32>)
    -> (tensor<16xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf64>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // Each all_reduce sits right after its last operand (where it can start behind the rest of
  // the backward pass), a bucket of one too: the sum of z right after z's gradient.
  // CHECK: %[[Z:.*]] = spmd.exp %arg2
  // CHECK-NEXT: spmd.all_reduce %[[Z]] {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>)
  // CHECK-NEXT: %[[Y:.*]] = spmd.exp %arg1
  // CHECK-NEXT: %[[X:.*]] = spmd.exp %arg0
  // CHECK-NEXT: %[[ALL:.*]]:3 = spmd.all_reduce %[[Z]], %[[Y]], %[[X]] {axis_name = "batch", reduction = #spmd.reduction<mean>}
  // Another element type is a different collective:
  // CHECK-NEXT: %[[F:.*]] = spmd.constant
  // CHECK-NEXT: spmd.all_reduce %[[F]] {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf64>)
  // CHECK-NEXT: spmd.neg %[[ALL]]#2
  // CHECK-NEXT: spmd.neg %[[ALL]]#1
  // CHECK-NEXT: spmd.neg %[[ALL]]#0
  // 64 bytes per bucket: z (16 B) and y (32 B) together after y, x (64 B) alone after x.
  // SMALL: %[[GY:.*]] = spmd.exp %arg1
  // SMALL-NEXT: %{{.*}}:2 = spmd.all_reduce %{{.*}}, %[[GY]] {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf32>, tensor<8xf32>)
  // SMALL-NEXT: %[[GX:.*]] = spmd.exp %arg0
  // SMALL-NEXT: spmd.all_reduce %[[GX]] {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<16xf32>)
  %gz = spmd.exp %z : (tensor<4xf32>) -> tensor<4xf32>
  %gy = spmd.exp %y : (tensor<8xf32>) -> tensor<8xf32>
  %gx = spmd.exp %x : (tensor<16xf32>) -> tensor<16xf32>
  %f = spmd.constant dense<1.0> : tensor<4xf64>
  %az = spmd.all_reduce %gz {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf32>) -> tensor<4xf32>
  %ay = spmd.all_reduce %gy {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<8xf32>) -> tensor<8xf32>
  %ax = spmd.all_reduce %gx {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<16xf32>) -> tensor<16xf32>
  %sz = spmd.all_reduce %gz {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>) -> tensor<4xf32>
  %af = spmd.all_reduce %f {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf64>) -> tensor<4xf64>
  %nx = spmd.neg %ax : (tensor<16xf32>) -> tensor<16xf32>
  %ny = spmd.neg %ay : (tensor<8xf32>) -> tensor<8xf32>
  %nz = spmd.neg %az : (tensor<4xf32>) -> tensor<4xf32>
  %w = spmd.add %nz, %sz : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %nx, %ny, %w, %af : tensor<16xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf64>
}

// -----

// %ay is used before %gx exists, so it cannot wait for a combined all_reduce after %gx.
// CHECK-LABEL: func.func @dependency
func.func @dependency(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK: %[[AY:.*]] = spmd.all_reduce %{{.*}} : (tensor<4xf32>) -> tensor<4xf32>
  // CHECK: spmd.mul %{{.*}}, %[[AY]]
  // CHECK: spmd.all_reduce %{{.*}} : (tensor<4xf32>) -> tensor<4xf32>
  %gy = spmd.exp %y : (tensor<4xf32>) -> tensor<4xf32>
  %ay = spmd.all_reduce %gy {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf32>) -> tensor<4xf32>
  %gx = spmd.mul %x, %ay : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ax = spmd.all_reduce %gx {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf32>) -> tensor<4xf32>
  return %ax : tensor<4xf32>
}

// -----

// All-reduces within the same replica groups combine, keeping the groups; other groups, or none,
// are other collectives.
// CHECK-LABEL: func.func @within_groups
func.func @within_groups(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // CHECK-DAG: spmd.all_reduce %{{.*}}, %{{.*}} {axis_name = "batch", group_size = 2 : i64, reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>} : (tensor<4xf32>, tensor<4xf32>)
  // CHECK-DAG: spmd.all_reduce %{{.*}} {axis_name = "batch", group_size = 2 : i64, reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 2, 3>} : (tensor<4xf32>)
  // CHECK-DAG: spmd.all_reduce %{{.*}} {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>)
  %a = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = spmd.all_reduce %y {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %c = spmd.all_reduce %z {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %d = spmd.all_reduce %z {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %b, %c, %d : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
