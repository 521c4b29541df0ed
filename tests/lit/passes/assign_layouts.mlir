// spmd-assign-layouts: convolutions write the backend's blocked layout, elementwise ops and
// normalization backward follow their operands, and a relayout to plain is inserted where a
// consumer reads plain only (a reduction over H, W; a function result); no layout changes nothing.
// (Channels-last, the CUDA backend's: assign_layouts_channels_last.mlir.)
// RUN: spmd-opt %s --spmd-assign-layouts=layout=nChw8c --split-input-file | FileCheck %s
// RUN: spmd-opt %s --spmd-assign-layouts --split-input-file | FileCheck %s --check-prefix=PLAIN
// RUN: not spmd-opt %s --spmd-assign-layouts=layout=nChw4c --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: spmd-assign-layouts: activation layouts are nChw8c, nChw16c (the CPU's channel blocks) or nhwc (channels-last), not 'nChw4c'

// A block: the stem conv (3 channels in, plain input) writes nChw8c; relu and the residual add
// run blocked; global pooling reads plain, so one relayout feeds it and the returned value.
// CHECK-LABEL: func.func @block
// PLAIN-LABEL: func.func @block
// PLAIN-NOT: nChw
// PLAIN-NOT: spmd.relayout
func.func @block(%x: tensor<2x3x8x8xf32>, %w1: tensor<16x3x3x3xf32>, %w2: tensor<16x16x3x3xf32>) -> (tensor<2x16xf32>, tensor<2x16x8x8xf32>) {
  // CHECK-NEXT: %[[C1:.*]] = spmd.conv2d %arg0, %arg1 {{.*}} -> tensor<2x16x8x8xf32, "nChw8c">
  // CHECK-NEXT: %[[R:.*]] = spmd.relu %[[C1]] : (tensor<2x16x8x8xf32, "nChw8c">) -> tensor<2x16x8x8xf32, "nChw8c">
  // CHECK-NEXT: %[[C2:.*]] = spmd.conv2d %[[R]], %arg2 {{.*}} : (tensor<2x16x8x8xf32, "nChw8c">, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32, "nChw8c">
  // CHECK-NEXT: %[[S:.*]] = spmd.add %[[C2]], %[[R]] : (tensor<2x16x8x8xf32, "nChw8c">, tensor<2x16x8x8xf32, "nChw8c">) -> tensor<2x16x8x8xf32, "nChw8c">
  // CHECK-NEXT: %[[P:.*]] = spmd.relayout %[[S]] : (tensor<2x16x8x8xf32, "nChw8c">) -> tensor<2x16x8x8xf32>
  // CHECK-NEXT: %[[M:.*]] = spmd.reduce_mean %[[P]] {axes = array<i64: 2, 3>} : (tensor<2x16x8x8xf32>) -> tensor<2x16xf32>
  // CHECK-NEXT: return %[[M]], %[[P]] : tensor<2x16xf32>, tensor<2x16x8x8xf32>
  %c1 = spmd.conv2d %x, %w1 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x8x8xf32>
  %r = spmd.relu %c1 : (tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %c2 = spmd.conv2d %r, %w2 {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x16x8x8xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x8x8xf32>
  %sum = spmd.add %c2, %r : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>) -> tensor<2x16x8x8xf32>
  %pool = spmd.reduce_mean %sum {axes = array<i64: 2, 3>} : (tensor<2x16x8x8xf32>) -> tensor<2x16xf32>
  return %pool, %sum : tensor<2x16xf32>, tensor<2x16x8x8xf32>
}

// -----

// Backward: the conv's result gradient (a plain argument) is read as it is; the data gradient is
// written blocked; the per-channel bias sum reads the blocked gradient directly; a channel count
// that does not fill whole blocks (12) stays plain; batch_norm_train and its backward read the
// blocked input as it is and write its layout.
// CHECK-LABEL: func.func @backward
func.func @backward(%dy: tensor<2x16x4x4xf32>, %w: tensor<16x16x3x3xf32>, %w12: tensor<12x16x1x1xf32>, %s: tensor<16xf32>) -> (tensor<16xf32>, tensor<2x12x4x4xf32>, tensor<2x16x4x4xf32>) {
  // CHECK-NEXT: %[[DX:.*]] = spmd.conv2d_backward_data %arg0, %arg1 {{.*}} -> tensor<2x16x4x4xf32, "nChw8c">
  // CHECK-NEXT: %[[DB:.*]] = spmd.reduce_sum %[[DX]] {axes = array<i64: 0, 2, 3>} : (tensor<2x16x4x4xf32, "nChw8c">) -> tensor<16xf32>
  // CHECK-NEXT: %[[C12:.*]] = spmd.conv2d %[[DX]], %arg2 {{.*}} : (tensor<2x16x4x4xf32, "nChw8c">, tensor<12x16x1x1xf32>) -> tensor<2x12x4x4xf32>
  // CHECK-NEXT: %{{.*}}, %[[MEAN:.*]], %[[VAR:.*]] = spmd.batch_norm_train %[[DX]], %arg3, %arg3 {{.*}} : (tensor<2x16x4x4xf32, "nChw8c">, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x4x4xf32, "nChw8c">, tensor<16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %[[G:.*]], %{{.*}}, %{{.*}} = spmd.batch_norm_train_backward %arg0, %[[DX]], {{.*}} -> (tensor<2x16x4x4xf32, "nChw8c">, tensor<16xf32>, tensor<16xf32>)
  // CHECK-NEXT: %[[GP:.*]] = spmd.relayout %[[G]] : (tensor<2x16x4x4xf32, "nChw8c">) -> tensor<2x16x4x4xf32>
  // CHECK-NEXT: return %[[DB]], %[[C12]], %[[GP]]
  %dx = spmd.conv2d_backward_data %dy, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x16x4x4xf32>, tensor<16x16x3x3xf32>) -> tensor<2x16x4x4xf32>
  %db = spmd.reduce_sum %dx {axes = array<i64: 0, 2, 3>} : (tensor<2x16x4x4xf32>) -> tensor<16xf32>
  %c12 = spmd.conv2d %dx, %w12 {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x16x4x4xf32>, tensor<12x16x1x1xf32>) -> tensor<2x12x4x4xf32>
  %y, %m, %v = spmd.batch_norm_train %dx, %s, %s {epsilon = 1.0e-05 : f64} : (tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
  %g, %gs, %go = spmd.batch_norm_train_backward %dy, %dx, %s, %m, %v {epsilon = 1.0e-05 : f64} : (tensor<2x16x4x4xf32>, tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x4x4xf32>, tensor<16xf32>, tensor<16xf32>)
  return %db, %c12, %g : tensor<16xf32>, tensor<2x12x4x4xf32>, tensor<2x16x4x4xf32>
}

// -----

// A fused body runs in its blocked operand's layout, broadcasting smaller operands read plain (a
// blocked one, here a [1, 8, 1, 1] a convolution wrote, is relaid to plain first); one with only
// scalars runs blocked too.
// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x8x2x2xf32>, %w: tensor<8x8x1x1xf32>, %b: tensor<8xf32>, %x1: tensor<1x8x1x1xf32>) -> (tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) {
  // CHECK-NEXT: %[[C:.*]] = spmd.conv2d {{.*}} -> tensor<2x8x2x2xf32, "nChw8c">
  // CHECK-NEXT: %[[C1:.*]] = spmd.conv2d {{.*}} -> tensor<1x8x1x1xf32, "nChw8c">
  // CHECK-NEXT: %[[P1:.*]] = spmd.relayout %[[C1]] : (tensor<1x8x1x1xf32, "nChw8c">) -> tensor<1x8x1x1xf32>
  // CHECK-NEXT: %[[F:.*]] = spmd.fused %[[C]], %arg2, %[[P1]] {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8x2x2xf32, "nChw8c">, %{{.*}}: tensor<8xf32>, %{{.*}}: tensor<1x8x1x1xf32>):
  // CHECK-NEXT: spmd.broadcast_in_dim {{.*}} : (tensor<8xf32>) -> tensor<2x8x2x2xf32, "nChw8c">
  // CHECK: } : (tensor<2x8x2x2xf32, "nChw8c">, tensor<8xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32, "nChw8c">
  // CHECK-NEXT: %[[S:.*]] = spmd.fused %[[C]] {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8x2x2xf32, "nChw8c">):
  // CHECK: } : (tensor<2x8x2x2xf32, "nChw8c">) -> tensor<2x8x2x2xf32, "nChw8c">
  // CHECK-NEXT: %[[FP:.*]] = spmd.relayout %[[F]]
  // CHECK-NEXT: %[[SP:.*]] = spmd.relayout %[[S]]
  // CHECK-NEXT: return %[[FP]], %[[SP]]
  %c = spmd.conv2d %x, %w {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x8x2x2xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x2x2xf32>
  %c1 = spmd.conv2d %x1, %w {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<1x8x1x1xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  %f = spmd.fused %c, %b, %c1 {
  ^bb0(%a: tensor<2x8x2x2xf32>, %v: tensor<8xf32>, %u: tensor<1x8x1x1xf32>):
    %bb = spmd.broadcast_in_dim %v {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<2x8x2x2xf32>
    %s = spmd.add %a, %bb : (tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
    %ub = spmd.broadcast_in_dim %u {dims = array<i64: 0, 1, 2, 3>} : (tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32>
    %t = spmd.mul %s, %ub : (tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
    spmd.yield %t : tensor<2x8x2x2xf32>
  } : (tensor<2x8x2x2xf32>, tensor<8xf32>, tensor<1x8x1x1xf32>) -> tensor<2x8x2x2xf32>
  %g = spmd.fused %c {
  ^bb0(%a: tensor<2x8x2x2xf32>):
    %two = spmd.constant dense<2.0> : tensor<2x8x2x2xf32>
    %m = spmd.mul %a, %two : (tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
    %r = spmd.relu %m : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
    spmd.yield %r : tensor<2x8x2x2xf32>
  } : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
  return %f, %g : tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>
}

// -----

// A bf16 step's roundings (spmd-widen-bf16: a convert to bf16 and back after each op) follow their
// operand's layout like elementwise ops, bf16 included, so the batch norm after them reads the
// convolution's blocked result as it is; a conversion to f64 is a kernel's and reads plain.
// CHECK-LABEL: func.func @bf16_roundings
func.func @bf16_roundings(%x: tensor<2x8x4x4xf32>, %w: tensor<8x8x1x1xf32>, %s: tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf64>) {
  // CHECK-NEXT: %[[C:.*]] = spmd.conv2d {{.*}} -> tensor<2x8x4x4xf32, "nChw8c">
  // CHECK-NEXT: %[[N:.*]] = spmd.convert %[[C]] : (tensor<2x8x4x4xf32, "nChw8c">) -> tensor<2x8x4x4xbf16, "nChw8c">
  // CHECK-NEXT: %[[W:.*]] = spmd.convert %[[N]] : (tensor<2x8x4x4xbf16, "nChw8c">) -> tensor<2x8x4x4xf32, "nChw8c">
  // CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = spmd.batch_norm_train %[[W]], {{.*}} -> (tensor<2x8x4x4xf32, "nChw8c">, tensor<8xf32>, tensor<8xf32>)
  // CHECK-NEXT: %[[P:.*]] = spmd.relayout %[[W]] : (tensor<2x8x4x4xf32, "nChw8c">) -> tensor<2x8x4x4xf32>
  // CHECK-NEXT: %[[D:.*]] = spmd.convert %[[P]] : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf64>
  // CHECK-NEXT: %[[YP:.*]] = spmd.relayout %[[Y]]
  // CHECK-NEXT: return %[[YP]], %[[D]]
  %c = spmd.conv2d %x, %w {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x8x1x1xf32>) -> tensor<2x8x4x4xf32>
  %n = spmd.convert %c : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xbf16>
  %wide = spmd.convert %n : (tensor<2x8x4x4xbf16>) -> tensor<2x8x4x4xf32>
  %y, %m, %v = spmd.batch_norm_train %wide, %s, %s {epsilon = 1.0e-05 : f64} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %d = spmd.convert %wide : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf64>
  return %y, %d : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf64>
}
