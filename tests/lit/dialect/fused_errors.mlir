// The spmd.fused verifier: body arguments match the inputs, the body holds only fusable ops of
// the iteration space, a broadcast reads an input, and a bf16 value is only widened or yielded.
// RUN: spmd-opt %s -split-input-file -verify-diagnostics

func.func @not_fusable(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'spmd.fused' op body argument 0 is 'tensor<2x3xf32>' but input 0 is 'tensor<2x4xf32>'}}
  %r = spmd.fused %x {
  ^bb0(%a: tensor<2x3xf32>):
    spmd.yield %a : tensor<2x3xf32>
  } : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @matmul_inside(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = spmd.fused %x {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{cannot be part of a spmd.fused body; only elementwise ops, converts between f32 and bf16, splat constants and broadcast_in_dim can}}
    %m = spmd.matmul %a, %a {transpose_lhs = false, transpose_rhs = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    spmd.yield %m : tensor<4x4xf32>
  } : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

func.func @two_spaces(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{every result must lie in the iteration space 'tensor<4x4xf32>' (one shape and layout, in the body's type 'f32', or bf16 where that is f32), got 'tensor<4xf32>'}}
  %r:2 = spmd.fused %x, %y {
  ^bb0(%a: tensor<4x4xf32>, %b: tensor<4xf32>):
    %e = spmd.exp %a : (tensor<4x4xf32>) -> tensor<4x4xf32>
    spmd.yield %e, %b : tensor<4x4xf32>, tensor<4xf32>
  } : (tensor<4x4xf32>, tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<4x4xf32>, tensor<4xf32>
}

// -----

func.func @broadcast_of_body_value(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = spmd.fused %x {
  ^bb0(%a: tensor<4x4xf32>):
    %e = spmd.exp %a : (tensor<4x4xf32>) -> tensor<4x4xf32>
    // expected-error @+1 {{in a spmd.fused body must broadcast a body argument (an input)}}
    %b = spmd.broadcast_in_dim %e {dims = array<i64: 0, 1>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    spmd.yield %b : tensor<4x4xf32>
  } : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

func.func @bf16_read_by_an_op(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %r = spmd.fused %x {
  ^bb0(%a: tensor<4xbf16>):
    // expected-error @+1 {{in a spmd.fused body reads a bf16 value; only a convert to f32 or the yield may (every other op computes in f32)}}
    %e = spmd.exp %a : (tensor<4xbf16>) -> tensor<4xbf16>
    spmd.yield %e : tensor<4xbf16>
  } : (tensor<4xbf16>) -> tensor<4xbf16>
  return %r : tensor<4xbf16>
}

// -----

func.func @bf16_in_an_f64_body(%x: tensor<4xf64>, %y: tensor<4xf32>) -> (tensor<4xf64>, tensor<4xbf16>) {
  // expected-error @+1 {{every result must lie in the iteration space 'tensor<4xf64>' (one shape and layout, in the body's type 'f32', or bf16 where that is f32), got 'tensor<4xf64>'}}
  %r:2 = spmd.fused %x, %y {
  ^bb0(%a: tensor<4xf64>, %b: tensor<4xf32>):
    %e = spmd.exp %a : (tensor<4xf64>) -> tensor<4xf64>
    %c = spmd.convert %b : (tensor<4xf32>) -> tensor<4xbf16>
    spmd.yield %e, %c : tensor<4xf64>, tensor<4xbf16>
  } : (tensor<4xf64>, tensor<4xf32>) -> (tensor<4xf64>, tensor<4xbf16>)
  return %r#0, %r#1 : tensor<4xf64>, tensor<4xbf16>
}
