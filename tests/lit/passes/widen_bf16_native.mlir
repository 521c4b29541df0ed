// spmd-widen-bf16 with native-kernels (pmap sets it where the backend has bf16 kernels: oneDNN on
// AVX512-BF16 or AMX, cuDNN and cuBLAS): a convolution or matmul whose float operands and results
// are all bf16 stays in bf16, reading the rounded values its operands' ops leave and giving a
// bf16 result its readers widen; every other bf16 op is widened as without the option. Then spmd-assign-layouts gives the kept convolution's bf16 result the
// blocked layout, so its widening and the batch norm after it stay blocked.
// RUN: spmd-opt %s --spmd-widen-bf16=native-kernels=true | FileCheck %s
// RUN: spmd-opt %s --spmd-widen-bf16=native-kernels=true --spmd-assign-layouts=layout=nChw8c | FileCheck %s --check-prefix=LAYOUT
// RUN: spmd-opt %s --spmd-widen-bf16 | FileCheck %s --check-prefix=EMULATED

// CHECK-LABEL: func.func @policy
func.func @policy(%x: tensor<2x8x4x4xf32>, %w: tensor<8x8x3x3xf32>, %s: tensor<8xf32>, %d: tensor<128x10xf32>) -> (tensor<2x10xf32>, tensor<2x10xbf16>) {
  // CHECK: %[[XB:.*]] = spmd.convert %arg0 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xbf16>
  // CHECK: %[[WB:.*]] = spmd.convert %arg1 : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xbf16>
  // CHECK: %[[C:.*]] = spmd.conv2d %[[XB]], %[[WB]] {{.*}} : (tensor<2x8x4x4xbf16>, tensor<8x8x3x3xbf16>) -> tensor<2x8x4x4xbf16>
  // CHECK: %[[CW:.*]] = spmd.convert %[[C]] : (tensor<2x8x4x4xbf16>) -> tensor<2x8x4x4xf32>
  // CHECK: spmd.batch_norm_train %[[CW]]
  // LAYOUT: spmd.conv2d {{.*}} -> tensor<2x8x4x4xbf16, "nChw8c">
  // LAYOUT-NEXT: spmd.convert {{.*}} : (tensor<2x8x4x4xbf16, "nChw8c">) -> tensor<2x8x4x4xf32, "nChw8c">
  // LAYOUT-NEXT: spmd.batch_norm_train {{.*}} -> (tensor<2x8x4x4xf32, "nChw8c">, tensor<8xf32>, tensor<8xf32>)
  // EMULATED: spmd.conv2d {{.*}} : (tensor<2x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32>
  %xb = spmd.convert %x : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xbf16>
  %wb = spmd.convert %w : (tensor<8x8x3x3xf32>) -> tensor<8x8x3x3xbf16>
  %c = spmd.conv2d %xb, %wb {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x8x4x4xbf16>, tensor<8x8x3x3xbf16>) -> tensor<2x8x4x4xbf16>
  %cw = spmd.convert %c : (tensor<2x8x4x4xbf16>) -> tensor<2x8x4x4xf32>
  %y, %m, %v = spmd.batch_norm_train %cw, %s, %s {epsilon = 1.0e-05 : f64} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  // A bf16 relu between them: widened and rounded; the matmul reads the rounding.
  // CHECK: %[[R:.*]] = spmd.relu %{{.*}} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  // CHECK: %[[RB:.*]] = spmd.convert %[[R]] : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xbf16>
  // CHECK: %[[F:.*]] = spmd.reshape %{{.*}} : (tensor<2x8x4x4xf32>) -> tensor<2x128xf32>
  // CHECK: %[[FB:.*]] = spmd.convert %[[F]] : (tensor<2x128xf32>) -> tensor<2x128xbf16>
  %yb = spmd.convert %y : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xbf16>
  %r = spmd.relu %yb : (tensor<2x8x4x4xbf16>) -> tensor<2x8x4x4xbf16>
  %f = spmd.reshape %r : (tensor<2x8x4x4xbf16>) -> tensor<2x128xbf16>
  // A matmul on bf16 with a bf16 literal bias stays bf16 and reads the bf16 literal.
  // CHECK: %[[DB:.*]] = spmd.convert %arg3 : (tensor<128x10xf32>) -> tensor<128x10xbf16>
  // CHECK: %[[K:.*]] = spmd.constant dense<5.000000e-01> : tensor<10xbf16>
  // CHECK-NOT: tensor<10xf32>
  // CHECK: %[[L:.*]] = spmd.matmul %[[FB]], %[[DB]], %[[K]] : (tensor<2x128xbf16>, tensor<128x10xbf16>, tensor<10xbf16>) -> tensor<2x10xbf16>
  %db = spmd.convert %d : (tensor<128x10xf32>) -> tensor<128x10xbf16>
  %k = spmd.constant dense<0.5> : tensor<10xbf16>
  %l = spmd.matmul %f, %db, %k : (tensor<2x128xbf16>, tensor<128x10xbf16>, tensor<10xbf16>) -> tensor<2x10xbf16>
  // An add on its result is widened.
  // CHECK: %[[LW:.*]] = spmd.convert %[[L]] : (tensor<2x10xbf16>) -> tensor<2x10xf32>
  // CHECK: spmd.add %[[LW]], %[[LW]] : (tensor<2x10xf32>, tensor<2x10xf32>) -> tensor<2x10xf32>
  %a = spmd.add %l, %l : (tensor<2x10xbf16>, tensor<2x10xbf16>) -> tensor<2x10xbf16>
  %lw = spmd.convert %l : (tensor<2x10xbf16>) -> tensor<2x10xf32>
  return %lw, %a : tensor<2x10xf32>, tensor<2x10xbf16>
}
