// spmd-gather-at-use (FSDP) after spmd-shard-update over 2 replicas: w (5 elements) comes in as
// this replica's slice of 3. Instead of one all_gather at the top of the step whose result lives
// until the backward pass reads w, every op that reads the whole of w gets its own gather (with
// the reshape and the slice that cut the padding off) right before it, so the plan frees each
// gathered copy after its one reader. The update still reads the slice itself.
// RUN: spmd-opt %s --spmd-shard-update --spmd-gather-at-use --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[W:.*]]: tensor<3xf32> {spmd.mapped, spmd.shard_of = tensor<5xf32>}, %[[X:.*]]: tensor<5xf32> {spmd.mapped})
func.func @step(%w: tensor<5xf32>, %x: tensor<5xf32> {spmd.mapped})
    -> (tensor<5xf32> {spmd.name = "params.w"}, tensor<f32> {spmd.name = "loss"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // The forward pass's reader: gathered right before it, nothing gathered earlier.
  // CHECK-NOT: spmd.all_gather
  // CHECK: %[[G1:.*]] = spmd.all_gather %[[W]] {axis_name = "batch", axis_size = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: %[[F1:.*]] = spmd.reshape %[[G1]] : (tensor<2x3xf32>) -> tensor<6xf32>
  // CHECK-NEXT: %[[W1:.*]] = spmd.slice %[[F1]] {limit = array<i64: 5>, start = array<i64: 0>}
  // CHECK-NEXT: %[[T:.*]] = spmd.mul %[[W1]], %[[X]]
  %t = spmd.mul %w, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK-NEXT: spmd.reduce_sum %[[T]]
  %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<5xf32>) -> tensor<f32>
  %loss = spmd.all_reduce %s {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<f32>) -> tensor<f32>
  %e = spmd.exp %x : (tensor<5xf32>) -> tensor<5xf32>
  // The backward pass's reader (one op reading w twice) gets a gather of its own, after the
  // ops in between.
  // CHECK: %[[E:.*]] = spmd.exp %[[X]]
  // CHECK-NEXT: %[[G2:.*]] = spmd.all_gather %[[W]]
  // CHECK-NEXT: %[[F2:.*]] = spmd.reshape %[[G2]]
  // CHECK-NEXT: %[[W2:.*]] = spmd.slice %[[F2]]
  // CHECK-NEXT: %[[WW:.*]] = spmd.mul %[[W2]], %[[W2]]
  %ww = spmd.mul %w, %w : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %dw = spmd.mul %ww, %e : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // The gradient is reduce_scattered and the update runs on the slice, as with ZeRO-1 alone.
  // CHECK: %[[GW:.*]] = spmd.reduce_scatter
  // CHECK-NOT: spmd.all_gather
  // CHECK: %[[NW:.*]] = spmd.sub %[[W]], %[[GW]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %gw = spmd.all_reduce %dw {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<5xf32>) -> tensor<5xf32>
  %nw = spmd.sub %w, %gw : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK: return %[[NW]], %{{.*}} : tensor<3xf32>, tensor<f32>
  return %nw, %loss : tensor<5xf32>, tensor<f32>
}

// -----

// A parameter whose slices split evenly (one reshape rebuilds it) that the step also returns
// whole: the returned value keeps its gather at the top, the other reader gets its own. An
// all_gather of a value that is not a sliced argument is left alone.
// CHECK-LABEL: func.func @even
func.func @even(%b: tensor<4xf32>, %c: tensor<2xf32> {spmd.mapped}, %y: tensor<4xf32> {spmd.mapped})
    -> (tensor<4xf32> {spmd.name = "params.b"}, tensor<2x2xf32> {spmd.name = "gathered"},
        tensor<4xf32> {spmd.name = "old_b"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // CHECK: %[[TOP:.*]] = spmd.all_gather %[[B:[^ ]*]] {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  // CHECK-NEXT: %[[WHOLE:.*]] = spmd.reshape %[[TOP]] : (tensor<2x2xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[KEEP:.*]] = spmd.all_gather %{{.*}} : (tensor<2xf32>) -> tensor<2x2xf32>
  // CHECK-NEXT: %[[G:.*]] = spmd.all_gather %[[B]] {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  // CHECK-NEXT: %[[WB:.*]] = spmd.reshape %[[G]] : (tensor<2x2xf32>) -> tensor<4xf32>
  // CHECK-NEXT: spmd.mul %[[WB]], %{{.*}}
  %kept = spmd.all_gather %c {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  %db = spmd.mul %b, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gb = spmd.all_reduce %db {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>) -> tensor<4xf32>
  %nb = spmd.sub %b, %gb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: return %{{.*}}, %[[KEEP]], %[[WHOLE]]
  return %nb, %kept, %b : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>
}
