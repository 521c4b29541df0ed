// spmd-shard-update (ZeRO-1) on SGD with momentum, weight decay and a scheduled learning rate,
// over 2 replicas: w (5 elements) splits into slices of 3 (the last padded with a zero), b (4)
// into 2. The gradients' all_reduces become reduce_scatters with their reduction (the mean's
// divisor is the job's, at run time: the program holds no 2), the update
// runs on tensor<3xf32> / tensor<2xf32>, the momentum and the parameters come in and go out as
// slices (spmd.shard_of names the full type), and an all_gather rebuilds w for the forward pass.
// RUN: spmd-opt %s --spmd-shard-update --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @sgd
// CHECK-SAME: (%[[W:.*]]: tensor<3xf32> {spmd.mapped, spmd.shard_of = tensor<5xf32>}, %[[M:.*]]: tensor<3xf32> {spmd.mapped, spmd.shard_of = tensor<5xf32>}, %[[B:.*]]: tensor<2xf32> {spmd.mapped, spmd.shard_of = tensor<4xf32>}, %[[LR:.*]]: tensor<f32>, %[[X:.*]]: tensor<5xf32> {spmd.mapped}, %[[Y:.*]]: tensor<4xf32> {spmd.mapped})
// CHECK-SAME: -> (tensor<3xf32> {spmd.mapped, spmd.name = "params.w", spmd.shard_of = tensor<5xf32>}, tensor<3xf32> {spmd.mapped, spmd.name = "opt.w", spmd.shard_of = tensor<5xf32>}, tensor<2xf32> {spmd.mapped, spmd.name = "params.b", spmd.shard_of = tensor<4xf32>}, tensor<f32> {spmd.name = "loss"})
func.func @sgd(%w: tensor<5xf32>, %m: tensor<5xf32>, %b: tensor<4xf32>, %lr: tensor<f32>,
               %x: tensor<5xf32> {spmd.mapped}, %y: tensor<4xf32> {spmd.mapped})
    -> (tensor<5xf32> {spmd.name = "params.w"}, tensor<5xf32> {spmd.name = "opt.w"},
        tensor<4xf32> {spmd.name = "params.b"}, tensor<f32> {spmd.name = "loss"})
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // The forward pass reads the whole of w, gathered from the slices (the padding cut off):
  // CHECK: %[[G:.*]] = spmd.all_gather %[[W]] {axis_name = "batch", axis_size = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: %[[GF:.*]] = spmd.reshape %[[G]] : (tensor<2x3xf32>) -> tensor<6xf32>
  // CHECK-NEXT: %[[WHOLE:.*]] = spmd.slice %[[GF]] {limit = array<i64: 5>, start = array<i64: 0>}
  // CHECK: spmd.mul %[[WHOLE]], %[[X]]
  %t = spmd.mul %w, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %s = spmd.reduce_sum %t {axes = array<i64: 0>} : (tensor<5xf32>) -> tensor<f32>
  %loss = spmd.all_reduce %s {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<f32>) -> tensor<f32>
  // The gradient of w, padded to [2, 3] and reduce_scattered right where it is computed (so it
  // can run behind the rest of the backward pass); a mean, as the all_reduce was.
  // CHECK: %[[DW:.*]] = spmd.mul %[[X]], %[[X]]
  // CHECK-NEXT: %[[PX:.*]] = spmd.pad %[[DW]] {high = array<i64: 1>, low = array<i64: 0>}
  // CHECK-NEXT: %[[RX:.*]] = spmd.reshape %[[PX]] : (tensor<6xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: %[[GW:.*]] = spmd.reduce_scatter %[[RX]] {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x3xf32>) -> tensor<3xf32>
  %dw = spmd.mul %x, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK-NEXT: %[[DB:.*]] = spmd.mul %[[Y]], %[[Y]]
  // CHECK-NEXT: %[[RY:.*]] = spmd.reshape %[[DB]] : (tensor<4xf32>) -> tensor<2x2xf32>
  // CHECK-NEXT: %[[SY:.*]] = spmd.reduce_scatter %[[RY]] {axis_name = "batch"} : (tensor<2x2xf32>) -> tensor<2xf32>
  %db = spmd.mul %y, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NOT: spmd.all_reduce %[[DW]]
  // CHECK-NOT: spmd.div
  %gw = spmd.all_reduce %dw {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<5xf32>) -> tensor<5xf32>
  // CHECK: %[[WD:.*]] = spmd.constant dense<5.000000e-04> : tensor<3xf32>
  %wd = spmd.constant dense<5.0e-4> : tensor<5xf32>
  // CHECK: %[[DECAY:.*]] = spmd.mul %[[W]], %[[WD]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %decay = spmd.mul %w, %wd : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK: %[[G2:.*]] = spmd.add %[[GW]], %[[DECAY]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g2 = spmd.add %gw, %decay : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %mu = spmd.constant dense<0.9> : tensor<5xf32>
  // CHECK: %[[MM:.*]] = spmd.mul %[[M]], %{{.*}} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %mm = spmd.mul %m, %mu : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK: %[[NM:.*]] = spmd.add %[[MM]], %[[G2]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nm = spmd.add %mm, %g2 : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // The scheduled rate is broadcast to the slice's shape:
  // CHECK: %[[LRS:.*]] = spmd.broadcast_in_dim %[[LR]] {dims = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %lrb = spmd.broadcast_in_dim %lr {dims = array<i64>} : (tensor<f32>) -> tensor<5xf32>
  // CHECK: %[[STEP:.*]] = spmd.mul %[[LRS]], %[[NM]]
  %step = spmd.mul %lrb, %nm : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // CHECK: %[[NW:.*]] = spmd.sub %[[W]], %[[STEP]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nw = spmd.sub %w, %step : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  // b: 4 elements, 2 per replica, no padding (one reshape); a sum all_reduce gets no division.
  // CHECK: %[[LRB:.*]] = spmd.broadcast_in_dim %[[LR]] {dims = array<i64>} : (tensor<f32>) -> tensor<2xf32>
  // CHECK-NEXT: %[[SB:.*]] = spmd.mul %[[LRB]], %[[SY]]
  %gb = spmd.all_reduce %db {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<4xf32>) -> tensor<4xf32>
  %lrb4 = spmd.broadcast_in_dim %lr {dims = array<i64>} : (tensor<f32>) -> tensor<4xf32>
  %sb = spmd.mul %lrb4, %gb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: %[[NB:.*]] = spmd.sub %[[B]], %{{.*}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %nb = spmd.sub %b, %sb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: return %[[NW]], %[[NM]], %[[NB]], %{{.*}} : tensor<3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<f32>
  return %nw, %nm, %nb, %loss : tensor<5xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// A gradient read outside the update too (its global norm, for clipping) keeps its all_reduce;
// the update takes this replica's slice of it at axis_index. One replica: nothing changes.
// CHECK-LABEL: func.func @clipped
// CHECK: %[[G:.*]] = spmd.all_reduce
// CHECK: %[[I:.*]] = spmd.axis_index {axis_name = "batch"} : tensor<i32>
// CHECK-NEXT: %[[IDS:.*]] = spmd.reshape %[[I]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT: %[[ROW:.*]] = spmd.embedding %{{.*}}, %[[IDS]] : (tensor<4x1xf32>, tensor<1xi32>) -> tensor<1x1xf32>
// CHECK-NEXT: %[[GS:.*]] = spmd.reshape %[[ROW]] : (tensor<1x1xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[SQ:.*]] = spmd.mul %[[G]], %[[G]] : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: spmd.reduce_sum %[[SQ]]
// CHECK-NOT: spmd.reduce_scatter
// CHECK: spmd.div %[[GS]], %{{.*}} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
// CHECK: return %{{.*}} : tensor<1xf32>
func.func @clipped(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  %g = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  %sq = spmd.mul %g, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = spmd.reduce_sum %sq {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  %nb = spmd.broadcast_in_dim %n {dims = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %scaled = spmd.div %g, %nb : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nw = spmd.sub %w, %scaled : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %nw : tensor<3xf32>
}

// -----

// Gradient accumulation (spmd.micro_batches = 2 of the axis' 4 replicas): the slices are cut over
// the 2 devices, so w (3 elements) splits into slices of 2; the gather and the reduce_scatter span
// the devices, and a gradient kept whole is sliced at the device's index (of_device), the same
// for each of its micro-batches.
// CHECK-LABEL: func.func @accumulated
// CHECK-SAME: (%[[W:.*]]: tensor<2xf32> {spmd.mapped, spmd.shard_of = tensor<3xf32>}
// CHECK: spmd.reduce_scatter %{{.*}} {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x2xf32>) -> tensor<2xf32>
// CHECK: return %{{.*}} : tensor<2xf32>
func.func @accumulated(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64, spmd.micro_batches = 2 : i64} {
  %g = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  %nw = spmd.sub %w, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %nw : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @accumulated_clipped
// CHECK: spmd.all_gather %{{.*}} {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
// CHECK: %[[G:.*]] = spmd.all_reduce
// CHECK: spmd.axis_index {axis_name = "batch", of_device} : tensor<i32>
// CHECK-NOT: spmd.reduce_scatter
// CHECK: return %{{.*}}, %{{.*}} : tensor<2xf32>, tensor<3xf32>
func.func @accumulated_clipped(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped}) -> (tensor<3xf32>, tensor<3xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64, spmd.micro_batches = 2 : i64} {
  %y = spmd.mul %w, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %g = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  %sq = spmd.mul %g, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = spmd.reduce_sum %sq {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  %nb = spmd.broadcast_in_dim %n {dims = array<i64>} : (tensor<f32>) -> tensor<3xf32>
  %scaled = spmd.div %g, %nb : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nw = spmd.sub %w, %scaled : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %nw, %y : tensor<3xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @one_replica
// CHECK-NOT: reduce_scatter
// CHECK: return %{{.*}} : tensor<3xf32>
func.func @one_replica(%w: tensor<3xf32>, %x: tensor<3xf32> {spmd.mapped}) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 1 : i64} {
  %g = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<3xf32>) -> tensor<3xf32>
  %nw = spmd.sub %w, %g : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %nw : tensor<3xf32>
}
