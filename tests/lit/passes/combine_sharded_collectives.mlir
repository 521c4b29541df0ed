// spmd-combine-sharded-collectives: ZeRO-1's per-tensor collectives in buckets. Gathers of sliced
// arguments that follow one another (their rebuilding reshapes and slices in between) become one
// gather of the concatenated slices, sliced back per member where the first one was; reduce_scatters
// of [N, c] rows become one of the rows concatenated along axis 1, right after the last operand,
// sliced back per member. A bucket closes at bucket-bytes, and a reduce_scatter whose result is
// used before another's operand exists stays on its own.
// RUN: spmd-opt %s --spmd-combine-sharded-collectives --split-input-file | FileCheck %s
// RUN: spmd-opt %s --spmd-combine-sharded-collectives="bucket-bytes=16" --split-input-file | FileCheck %s --check-prefix=SMALL

// CHECK-LABEL: func.func @zero1
// CHECK: %[[J:.*]] = spmd.concatenate %arg0, %arg1 {axis = 0 : i64} : (tensor<3xf32>, tensor<2xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[G:.*]] = spmd.all_gather %[[J]] {axis_name = "batch", axis_size = 2 : i64} : (tensor<5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: spmd.slice %[[G]] {limit = array<i64: 2, 3>, start = array<i64: 0, 0>} : (tensor<2x5xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: spmd.slice %[[G]] {limit = array<i64: 2, 5>, start = array<i64: 0, 3>} : (tensor<2x5xf32>) -> tensor<2x2xf32>
// CHECK-NOT: spmd.all_gather
// CHECK: %[[R:.*]] = spmd.concatenate %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x5xf32>
// CHECK-NEXT: %[[S:.*]] = spmd.reduce_scatter %[[R]] {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x5xf32>) -> tensor<5xf32>
// CHECK-NEXT: spmd.slice %[[S]] {limit = array<i64: 3>, start = array<i64: 0>}
// CHECK-NEXT: spmd.slice %[[S]] {limit = array<i64: 5>, start = array<i64: 3>}
// CHECK-NOT: spmd.reduce_scatter
// With 16-byte buckets the 20-byte gather of both does not fit: each stays alone.
// SMALL-LABEL: func.func @zero1
// SMALL-COUNT-2: spmd.all_gather %arg
// SMALL-COUNT-2: spmd.reduce_scatter
func.func @zero1(%w: tensor<3xf32> {spmd.mapped, spmd.shard_of = tensor<5xf32>},
                 %b: tensor<2xf32> {spmd.mapped, spmd.shard_of = tensor<4xf32>}, %x: tensor<5xf32> {spmd.mapped},
                 %y: tensor<4xf32> {spmd.mapped}) -> (tensor<3xf32>, tensor<2xf32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %g = spmd.all_gather %w {axis_name = "batch", axis_size = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
  %gf = spmd.reshape %g : (tensor<2x3xf32>) -> tensor<6xf32>
  %ww = spmd.slice %gf {limit = array<i64: 5>, start = array<i64: 0>} : (tensor<6xf32>) -> tensor<5xf32>
  %h = spmd.all_gather %b {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  %bw = spmd.reshape %h : (tensor<2x2xf32>) -> tensor<4xf32>
  %dw = spmd.mul %ww, %x : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
  %dwp = spmd.pad %dw {high = array<i64: 1>, low = array<i64: 0>} : (tensor<5xf32>) -> tensor<6xf32>
  %dwr = spmd.reshape %dwp : (tensor<6xf32>) -> tensor<2x3xf32>
  %sw = spmd.reduce_scatter %dwr {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x3xf32>) -> tensor<3xf32>
  %db = spmd.mul %bw, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dbr = spmd.reshape %db : (tensor<4xf32>) -> tensor<2x2xf32>
  %sb = spmd.reduce_scatter %dbr {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x2xf32>) -> tensor<2xf32>
  %nw = spmd.sub %w, %sw : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %nb = spmd.sub %b, %sb : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %nw, %nb : tensor<3xf32>, tensor<2xf32>
}

// -----

// A reduce_scatter whose result is read before the next gradient exists stays where it is.
// CHECK-LABEL: func.func @used_early
// CHECK-COUNT-2: spmd.reduce_scatter %{{.*}} : (tensor<2x2xf32>) -> tensor<2xf32>
// CHECK-NOT: spmd.concatenate
func.func @used_early(%x: tensor<2x2xf32> {spmd.mapped}) -> tensor<2xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %a = spmd.reduce_scatter %x {axis_name = "batch"} : (tensor<2x2xf32>) -> tensor<2xf32>
  %y = spmd.reshape %a : (tensor<2xf32>) -> tensor<1x2xf32>
  %z = spmd.concatenate %y, %y {axis = 0 : i64} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<2x2xf32>
  %b = spmd.reduce_scatter %z {axis_name = "batch"} : (tensor<2x2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

// FSDP: each reader's gathers (one run each); with prefetch the second run's gather is issued
// where the first run's rebuilding starts, before the first reader.
// RUN: spmd-opt %s --spmd-combine-sharded-collectives="prefetch=true" --split-input-file | FileCheck %s --check-prefix=PREFETCH
// CHECK-LABEL: func.func @fsdp
// CHECK: spmd.all_gather %arg0
// CHECK: spmd.mul
// CHECK: spmd.all_gather %arg1
// CHECK: spmd.mul
// PREFETCH-LABEL: func.func @fsdp
// PREFETCH: spmd.all_gather %arg0
// PREFETCH-NEXT: spmd.all_gather %arg1
// PREFETCH: spmd.mul
// PREFETCH: spmd.mul
func.func @fsdp(%w: tensor<2xf32> {spmd.mapped, spmd.shard_of = tensor<4xf32>},
                %v: tensor<2xf32> {spmd.mapped, spmd.shard_of = tensor<4xf32>}, %x: tensor<4xf32> {spmd.mapped})
    -> tensor<4xf32> attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %g = spmd.all_gather %w {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  %ww = spmd.reshape %g : (tensor<2x2xf32>) -> tensor<4xf32>
  %y = spmd.mul %ww, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %h = spmd.all_gather %v {axis_name = "batch", axis_size = 2 : i64} : (tensor<2xf32>) -> tensor<2x2xf32>
  %vv = spmd.reshape %h : (tensor<2x2xf32>) -> tensor<4xf32>
  %z = spmd.mul %vv, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z : tensor<4xf32>
}
