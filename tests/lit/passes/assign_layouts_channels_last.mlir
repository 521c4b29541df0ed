// spmd-assign-layouts with the CUDA backend's channels-last layout (layout=nhwc,
// SPMD_CHANNELS_LAST=1): as with the CPU's blocked layouts (assign_layouts.mlir), convolutions
// and batch norms write it and elementwise ops, fused bodies and bf16 roundings follow it; unlike
// them, any channel count and every float type take it, and reductions over any dims read it.
// RUN: spmd-opt %s --spmd-assign-layouts=layout=nhwc --split-input-file | FileCheck %s

// A block: the stem conv (1 channel in, plain input) writes nhwc whatever its channel count (12);
// relu and the residual add run channels-last; global pooling and the per-channel sum read it as
// it is; only the returned value is relaid to plain.
// CHECK-LABEL: func.func @block
// CHECK-NEXT: %[[C1:.*]] = spmd.conv2d %arg0, %arg1 {{.*}} : (tensor<2x1x8x8xf32>, tensor<12x1x3x3xf32>) -> tensor<2x12x8x8xf32, "nhwc">
// CHECK-NEXT: %[[R:.*]] = spmd.relu %[[C1]] : (tensor<2x12x8x8xf32, "nhwc">) -> tensor<2x12x8x8xf32, "nhwc">
// CHECK-NEXT: %[[C2:.*]] = spmd.conv2d %[[R]], %arg2 {{.*}} : (tensor<2x12x8x8xf32, "nhwc">, tensor<12x12x3x3xf32>) -> tensor<2x12x8x8xf32, "nhwc">
// CHECK-NEXT: %[[S:.*]] = spmd.add %[[C2]], %[[R]] : (tensor<2x12x8x8xf32, "nhwc">, tensor<2x12x8x8xf32, "nhwc">) -> tensor<2x12x8x8xf32, "nhwc">
// CHECK-NEXT: %[[M:.*]] = spmd.reduce_mean %[[S]] {axes = array<i64: 2, 3>} : (tensor<2x12x8x8xf32, "nhwc">) -> tensor<2x12xf32>
// CHECK-NEXT: %[[DB:.*]] = spmd.reduce_sum %[[S]] {axes = array<i64: 0, 2, 3>} : (tensor<2x12x8x8xf32, "nhwc">) -> tensor<12xf32>
// CHECK-NEXT: %[[P:.*]] = spmd.relayout %[[S]] : (tensor<2x12x8x8xf32, "nhwc">) -> tensor<2x12x8x8xf32>
// CHECK-NEXT: return %[[M]], %[[DB]], %[[P]]
func.func @block(%x: tensor<2x1x8x8xf32>, %w1: tensor<12x1x3x3xf32>, %w2: tensor<12x12x3x3xf32>) -> (tensor<2x12xf32>, tensor<12xf32>, tensor<2x12x8x8xf32>) {
  %c1 = spmd.conv2d %x, %w1 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x1x8x8xf32>, tensor<12x1x3x3xf32>) -> tensor<2x12x8x8xf32>
  %r = spmd.relu %c1 : (tensor<2x12x8x8xf32>) -> tensor<2x12x8x8xf32>
  %c2 = spmd.conv2d %r, %w2 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x12x8x8xf32>, tensor<12x12x3x3xf32>) -> tensor<2x12x8x8xf32>
  %sum = spmd.add %c2, %r : (tensor<2x12x8x8xf32>, tensor<2x12x8x8xf32>) -> tensor<2x12x8x8xf32>
  %pool = spmd.reduce_mean %sum {axes = array<i64: 2, 3>} : (tensor<2x12x8x8xf32>) -> tensor<2x12xf32>
  %db = spmd.reduce_sum %sum {axes = array<i64: 0, 2, 3>} : (tensor<2x12x8x8xf32>) -> tensor<12xf32>
  return %pool, %db, %sum : tensor<2x12xf32>, tensor<12xf32>, tensor<2x12x8x8xf32>
}

// -----

// Backward in f64 (channels-last takes every float type): the data gradient is written nhwc,
// batch norm and its backward read it as it is and write its layout; the filter gradient reads
// the nhwc gradient and the plain input.
// CHECK-LABEL: func.func @backward
// CHECK-NEXT: %[[DX:.*]] = spmd.conv2d_backward_data %arg0, %arg1 {{.*}} -> tensor<2x6x4x4xf64, "nhwc">
// CHECK-NEXT: %[[Y:.*]], %[[M:.*]], %[[V:.*]] = spmd.batch_norm_train %[[DX]], {{.*}} : (tensor<2x6x4x4xf64, "nhwc">, tensor<6xf64>, tensor<6xf64>) -> (tensor<2x6x4x4xf64, "nhwc">, tensor<6xf64>, tensor<6xf64>)
// CHECK-NEXT: %[[G:.*]], %{{.*}}, %{{.*}} = spmd.batch_norm_train_backward %[[Y]], %[[DX]], {{.*}} -> (tensor<2x6x4x4xf64, "nhwc">, tensor<6xf64>, tensor<6xf64>)
// CHECK-NEXT: %[[DW:.*]] = spmd.conv2d_backward_filter %arg2, %[[G]] {{.*}} : (tensor<2x6x4x4xf64>, tensor<2x6x4x4xf64, "nhwc">) -> tensor<6x6x3x3xf64>
// CHECK-NEXT: %[[GP:.*]] = spmd.relayout %[[G]] : (tensor<2x6x4x4xf64, "nhwc">) -> tensor<2x6x4x4xf64>
// CHECK-NEXT: return %[[GP]], %[[DW]]
func.func @backward(%dy: tensor<2x6x4x4xf64>, %w: tensor<6x6x3x3xf64>, %x: tensor<2x6x4x4xf64>, %s: tensor<6xf64>) -> (tensor<2x6x4x4xf64>, tensor<6x6x3x3xf64>) {
  %dx = spmd.conv2d_backward_data %dy, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x6x4x4xf64>, tensor<6x6x3x3xf64>) -> tensor<2x6x4x4xf64>
  %y, %m, %v = spmd.batch_norm_train %dx, %s, %s {epsilon = 1.0e-05 : f64} : (tensor<2x6x4x4xf64>, tensor<6xf64>, tensor<6xf64>) -> (tensor<2x6x4x4xf64>, tensor<6xf64>, tensor<6xf64>)
  %g, %gs, %go = spmd.batch_norm_train_backward %y, %dx, %s, %m, %v {epsilon = 1.0e-05 : f64} : (tensor<2x6x4x4xf64>, tensor<2x6x4x4xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) -> (tensor<2x6x4x4xf64>, tensor<6xf64>, tensor<6xf64>)
  %dw = spmd.conv2d_backward_filter %x, %g {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x6x4x4xf64>, tensor<2x6x4x4xf64>) -> tensor<6x6x3x3xf64>
  return %g, %dw : tensor<2x6x4x4xf64>, tensor<6x6x3x3xf64>
}

// -----

// A bf16 convolution kept in bf16 writes nhwc, and its rounding converts follow it; a fused body
// broadcasting a per-channel vector runs channels-last with the vector read plain.
// CHECK-LABEL: func.func @bf16_fused
// CHECK-NEXT: %[[C:.*]] = spmd.conv2d {{.*}} -> tensor<2x8x4x4xbf16, "nhwc">
// CHECK-NEXT: %[[W:.*]] = spmd.convert %[[C]] : (tensor<2x8x4x4xbf16, "nhwc">) -> tensor<2x8x4x4xf32, "nhwc">
// CHECK-NEXT: %[[F:.*]] = spmd.fused %[[W]], %arg2 {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8x4x4xf32, "nhwc">, %{{.*}}: tensor<8xf32>):
// CHECK-NEXT: spmd.broadcast_in_dim {{.*}} : (tensor<8xf32>) -> tensor<2x8x4x4xf32, "nhwc">
// CHECK: } : (tensor<2x8x4x4xf32, "nhwc">, tensor<8xf32>) -> tensor<2x8x4x4xf32, "nhwc">
// CHECK-NEXT: %[[FP:.*]] = spmd.relayout %[[F]] : (tensor<2x8x4x4xf32, "nhwc">) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: return %[[FP]]
func.func @bf16_fused(%x: tensor<2x8x4x4xbf16>, %w: tensor<8x8x1x1xbf16>, %b: tensor<8xf32>) -> tensor<2x8x4x4xf32> {
  %c = spmd.conv2d %x, %w {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x8x4x4xbf16>, tensor<8x8x1x1xbf16>) -> tensor<2x8x4x4xbf16>
  %wide = spmd.convert %c : (tensor<2x8x4x4xbf16>) -> tensor<2x8x4x4xf32>
  %f = spmd.fused %wide, %b {
  ^bb0(%a: tensor<2x8x4x4xf32>, %v: tensor<8xf32>):
    %bb = spmd.broadcast_in_dim %v {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %s = spmd.add %a, %bb : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
    spmd.yield %s : tensor<2x8x4x4xf32>
  } : (tensor<2x8x4x4xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
  return %f : tensor<2x8x4x4xf32>
}
