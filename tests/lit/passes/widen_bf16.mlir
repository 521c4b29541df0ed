// spmd-widen-bf16: bf16 ops compute in f32 between bf16 roundings. Each bf16 value is widened
// once, right after its definition; each op is rebuilt on f32 and its bf16 results rounded back;
// an op that reads another's bf16 result reads it rounded (convert to bf16, then to f32: the
// round trip is the semantics, never folded). Literals become f32; user converts and f32 ops stay.
// RUN: spmd-opt %s --spmd-widen-bf16 | FileCheck %s

// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>, %[[W:.*]]: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>)
func.func @chain(%x: tensor<4xbf16>, %w: tensor<4xf32>) -> (tensor<4xbf16>, tensor<4xf32>) {
  // CHECK-NEXT: %[[XW:.*]] = spmd.convert %[[X]] : (tensor<4xbf16>) -> tensor<4xf32>
  // CHECK-NEXT: %[[WB:.*]] = spmd.convert %[[W]] : (tensor<4xf32>) -> tensor<4xbf16>
  // CHECK-NEXT: %[[WBW:.*]] = spmd.convert %[[WB]] : (tensor<4xbf16>) -> tensor<4xf32>
  %wb = spmd.convert %w : (tensor<4xf32>) -> tensor<4xbf16>
  // CHECK-NEXT: %[[C:.*]] = spmd.constant dense<{{\[}}1.000000e+00, 5.000000e-01, -2.000000e+00, 3.906250e-03]> : tensor<4xf32>
  %c = spmd.constant dense<[1.0, 0.5, -2.0, 0.00390625]> : tensor<4xbf16>
  // CHECK-NEXT: %[[M:.*]] = spmd.mul %[[XW]], %[[WBW]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[MB:.*]] = spmd.convert %[[M]] : (tensor<4xf32>) -> tensor<4xbf16>
  // CHECK-NEXT: %[[MBW:.*]] = spmd.convert %[[MB]] : (tensor<4xbf16>) -> tensor<4xf32>
  %m = spmd.mul %x, %wb : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // The second reader of x widens nothing again; the literal is read in f32.
  // CHECK-NEXT: %[[A:.*]] = spmd.add %[[MBW]], %[[XW]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[AB:.*]] = spmd.convert %[[A]] : (tensor<4xf32>) -> tensor<4xbf16>
  // CHECK-NEXT: %[[ABW:.*]] = spmd.convert %[[AB]] : (tensor<4xbf16>) -> tensor<4xf32>
  %a = spmd.add %m, %x : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // CHECK-NEXT: %[[R:.*]] = spmd.mul %[[ABW]], %[[C]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: %[[RB:.*]] = spmd.convert %[[R]] : (tensor<4xf32>) -> tensor<4xbf16>
  %r = spmd.mul %a, %c : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
  // An f32 op is left alone; a user's convert back to f32 stays as written.
  // CHECK-NEXT: %[[F:.*]] = spmd.convert %[[RB]] : (tensor<4xbf16>) -> tensor<4xf32>
  // CHECK-NEXT: %[[S:.*]] = spmd.add %[[F]], %[[W]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %f = spmd.convert %r : (tensor<4xbf16>) -> tensor<4xf32>
  %s = spmd.add %f, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT: return %[[RB]], %[[S]] : tensor<4xbf16>, tensor<4xf32>
  return %r, %s : tensor<4xbf16>, tensor<4xf32>
}

// An op with an i32 operand and a bf16 result (embedding), and a reduction to a bf16 scalar. The
// lookup only moves bf16 values: the sum reads its f32 result unrounded. So do a scatter's,
// a max pool's and a segment max's readers, and a mean pool's read its rounding.
// CHECK-LABEL: func.func @mixed
func.func @mixed(%table: tensor<5x3xbf16>, %ids: tensor<2xi32>) -> tensor<bf16> {
  // CHECK-NEXT: %[[T:.*]] = spmd.convert %{{.*}} : (tensor<5x3xbf16>) -> tensor<5x3xf32>
  // CHECK-NEXT: %[[E:.*]] = spmd.embedding %[[T]], %{{.*}} : (tensor<5x3xf32>, tensor<2xi32>) -> tensor<2x3xf32>
  %e = spmd.embedding %table, %ids : (tensor<5x3xbf16>, tensor<2xi32>) -> tensor<2x3xbf16>
  // CHECK-NEXT: spmd.reduce_sum %[[E]] {axes = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  // CHECK-NEXT: %[[SB:.*]] = spmd.convert %{{.*}} : (tensor<f32>) -> tensor<bf16>
  %s = spmd.reduce_sum %e {axes = array<i64: 0, 1>} : (tensor<2x3xbf16>) -> tensor<bf16>
  // CHECK-NEXT: return %[[SB]] : tensor<bf16>
  return %s : tensor<bf16>
}

// CHECK-LABEL: func.func @moves
func.func @moves(%x: tensor<6x5xbf16>, %at: tensor<6x2xi32>, %u: tensor<6x2xbf16>, %ids: tensor<6xi32>,
                 %img: tensor<1x1x4x4xbf16>) -> (tensor<6x5xbf16>, tensor<4x2xbf16>, tensor<1x1x2x2xbf16>, tensor<1x1x2x2xbf16>) {
  // CHECK: %[[SC:.*]] = spmd.scatter %{{.*}}, %arg1, %{{.*}} {axis = 1 : i64} : (tensor<6x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x5xf32>
  // CHECK-NEXT: %[[N:.*]] = spmd.neg %[[SC]]
  %sc = spmd.scatter %x, %at, %u {axis = 1} : (tensor<6x5xbf16>, tensor<6x2xi32>, tensor<6x2xbf16>) -> tensor<6x5xbf16>
  %n = spmd.neg %sc : (tensor<6x5xbf16>) -> tensor<6x5xbf16>
  // CHECK: %[[SEG:.*]] = spmd.segment_reduce %{{.*}}, %arg3 {reduction = #spmd.reduction<max>} : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<4x2xf32>
  // CHECK-NEXT: %[[SEGB:.*]] = spmd.convert %[[SEG]] : (tensor<4x2xf32>) -> tensor<4x2xbf16>
  %seg = spmd.segment_reduce %u, %ids {reduction = #spmd.reduction<max>} : (tensor<6x2xbf16>, tensor<6xi32>) -> tensor<4x2xbf16>
  // CHECK: %[[MP:.*]] = spmd.reduce_window %{{.*}} {{.*}}reduction = #spmd.reduction<max>{{.*}} -> tensor<1x1x2x2xf32>
  // CHECK-NEXT: spmd.convert %[[MP]] : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xbf16>
  // CHECK-NEXT: %[[AP:.*]] = spmd.reduce_window %{{.*}} {{.*}}reduction = #spmd.reduction<mean>{{.*}} -> tensor<1x1x2x2xf32>
  // CHECK-NEXT: %[[APB:.*]] = spmd.convert %[[AP]] : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xbf16>
  // CHECK-NEXT: %[[APW:.*]] = spmd.convert %[[APB]] : (tensor<1x1x2x2xbf16>) -> tensor<1x1x2x2xf32>
  // CHECK-NEXT: spmd.add %[[MP]], %[[APW]]
  %mp = spmd.reduce_window %img {reduction = #spmd.reduction<max>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<1x1x4x4xbf16>) -> tensor<1x1x2x2xbf16>
  %ap = spmd.reduce_window %img {reduction = #spmd.reduction<mean>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<1x1x4x4xbf16>) -> tensor<1x1x2x2xbf16>
  %sum = spmd.add %mp, %ap : (tensor<1x1x2x2xbf16>, tensor<1x1x2x2xbf16>) -> tensor<1x1x2x2xbf16>
  return %n, %seg, %sum, %mp : tensor<6x5xbf16>, tensor<4x2xbf16>, tensor<1x1x2x2xbf16>, tensor<1x1x2x2xbf16>
}

// Roundings that change nothing are left out. A relu of a rounded value (here the user's rounding
// of an f32 batch norm, as the mixed-precision policy writes it) reads the value before the
// rounding, relu commuting with it, and is rounded after; the user's rounding, read by nothing
// else, is erased, so batch_norm_train -> relu meet for spmd-fuse-relu. Ops that only move
// or select values (neg, reshape) give bf16 values on bf16 inputs: readers read their f32 result
// as it is, and only a returned one is rounded (to its bf16 type, a no-op on the value).
// CHECK-LABEL: func.func @exact
func.func @exact(%x: tensor<2x8x2x2xf32>, %s: tensor<8xf32>) -> (tensor<2x8x2x2xbf16>, tensor<2x32xbf16>) {
  // CHECK-NEXT: %[[Y:.*]], %{{.*}}, %{{.*}} = spmd.batch_norm_train %arg0
  // CHECK-NEXT: %[[R:.*]] = spmd.relu %[[Y]] : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
  // CHECK-NEXT: %[[RB:.*]] = spmd.convert %[[R]] : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xbf16>
  // CHECK-NEXT: %[[RW:.*]] = spmd.convert %[[RB]] : (tensor<2x8x2x2xbf16>) -> tensor<2x8x2x2xf32>
  // CHECK-NEXT: %[[N:.*]] = spmd.neg %[[RW]] : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
  // CHECK-NEXT: %[[T:.*]] = spmd.reshape %[[N]] : (tensor<2x8x2x2xf32>) -> tensor<2x32xf32>
  // CHECK-NEXT: %[[TB:.*]] = spmd.convert %[[T]] : (tensor<2x32xf32>) -> tensor<2x32xbf16>
  // CHECK-NEXT: %[[A:.*]] = spmd.add %[[RW]], %[[N]] : (tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xf32>
  // CHECK-NEXT: %[[AB:.*]] = spmd.convert %[[A]] : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xbf16>
  // CHECK-NEXT: return %[[AB]], %[[TB]]
  %y, %m, %v = spmd.batch_norm_train %x, %s, %s {epsilon = 1.0e-05 : f64} : (tensor<2x8x2x2xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x2x2xf32>, tensor<8xf32>, tensor<8xf32>)
  %yb = spmd.convert %y : (tensor<2x8x2x2xf32>) -> tensor<2x8x2x2xbf16>
  %r = spmd.relu %yb : (tensor<2x8x2x2xbf16>) -> tensor<2x8x2x2xbf16>
  %n = spmd.neg %r : (tensor<2x8x2x2xbf16>) -> tensor<2x8x2x2xbf16>
  %t = spmd.reshape %n : (tensor<2x8x2x2xbf16>) -> tensor<2x32xbf16>
  %a = spmd.add %r, %n : (tensor<2x8x2x2xbf16>, tensor<2x8x2x2xbf16>) -> tensor<2x8x2x2xbf16>
  return %a, %t : tensor<2x8x2x2xbf16>, tensor<2x32xbf16>
}
