// Every spmd op prints, re-parses and prints again identically (generic and custom form).
// RUN: spmd-opt %s | spmd-opt | FileCheck %s
// RUN: spmd-opt %s --mlir-print-op-generic | spmd-opt | FileCheck %s

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>,
                   %c: tensor<4xf32>, %m: tensor<6x5xf32>, %n: tensor<5x7xf32>,
                   %labels: tensor<6xi32>) -> tensor<6xf32> {
  // CHECK: spmd.constant dense<1.500000e+00> : tensor<4xf32>
  %k = spmd.constant dense<1.5> : tensor<4xf32>
  // CHECK: spmd.conv2d %{{.*}}, %{{.*}}, %{{.*}} {padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %y = spmd.conv2d %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.conv2d %{{.*}}, %{{.*}} {padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %y2 = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  // CHECK: spmd.batch_norm_train {{.*}} -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %bn, %mean, %var = spmd.batch_norm_train %y, %c, %k {epsilon = 1.0e-5 : f64} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: spmd.batch_norm_train %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = {{.*}}} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %rows = spmd.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %bnm:3 = spmd.batch_norm_train %y, %c, %k, %rows {epsilon = 1.0e-5 : f64} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: spmd.batch_norm_infer
  %bi = spmd.batch_norm_infer %bn, %c, %k, %mean, %var {epsilon = 1.0e-5 : f64} : (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.add
  %s = spmd.add %bi, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.sub
  %s1 = spmd.sub %s, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.mul
  %s2 = spmd.mul %s1, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.div
  %s3 = spmd.div %s2, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.max
  %s4 = spmd.max %s3, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.min
  %s5 = spmd.min %s3, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.greater %{{.*}}, %{{.*}} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %c0 = spmd.greater %s5, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.less_equal
  %c1 = spmd.less_equal %c0, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.less
  %c2 = spmd.less %c1, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.equal
  %c3 = spmd.equal %c2, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.not_equal
  %c4 = spmd.not_equal %c3, %bn : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.neg
  %u0 = spmd.neg %s4 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.exp
  %u1 = spmd.exp %u0 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.tanh
  %t1 = spmd.tanh %u1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.sigmoid
  %t2 = spmd.sigmoid %t1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.abs
  %ab = spmd.abs %t2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.gelu
  %t3 = spmd.gelu %t2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.sin
  %sn = spmd.sin %t3 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.cos
  %cs = spmd.cos %sn : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.log1p
  %l1p = spmd.log1p %t2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.expm1
  %em1 = spmd.expm1 %l1p : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.erf
  %erf = spmd.erf %em1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.erfinv
  %erfinv = spmd.erfinv %erf : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.pow
  %pw = spmd.pow %erfinv, %erf : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.floor
  %fl = spmd.floor %pw : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.ceil
  %ce = spmd.ceil %fl : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.round
  %ro = spmd.round %ce : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.sign
  %sg = spmd.sign %ro : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.gelu_backward
  %t4 = spmd.gelu_backward %t3, %t2 : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.reduce_window %{{.*}} {count_include_pad = true, dilation = array<i64: 1, 1>, padding = array<i64: 1, 1>, reduction = #spmd.reduction<max>, stride = array<i64: 2, 2>, window = array<i64: 3, 3>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  %p0 = spmd.reduce_window %x {reduction = #spmd.reduction<max>, window = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: spmd.reduce_window %{{.*}} {{.*}}reduction = #spmd.reduction<mean>{{.*}} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  %p1 = spmd.reduce_window %x {reduction = #spmd.reduction<mean>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  // Dilated taps two apart: the 3x3 window spans 5x5.
  // CHECK: spmd.reduce_window %{{.*}} {{.*}}dilation = array<i64: 2, 2>{{.*}} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %pdil = spmd.reduce_window %x {reduction = #spmd.reduction<sum>, window = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>, dilation = array<i64: 2, 2>, count_include_pad = false} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: spmd.reduce_window_backward %{{.*}}, %{{.*}} {{.*}} : (tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %p2 = spmd.reduce_window_backward %p0, %x {reduction = #spmd.reduction<max>, window = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: spmd.reduce_window_backward %{{.*}} {{.*}} : (tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32>
  %p3 = spmd.reduce_window_backward %p1 {reduction = #spmd.reduction<mean>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: spmd.softmax %{{.*}} {axis = 1 : i64} : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %sm = spmd.softmax %m {axis = 1 : i64} : (tensor<6x5xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.log_softmax %{{.*}} {axis = 0 : i64} : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %lsm = spmd.log_softmax %sm {axis = 0 : i64} : (tensor<6x5xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.random_fold_in %{{.*}}, %{{.*}} : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  %key = spmd.constant dense<[1, 2]> : tensor<2xi32>
  %step = spmd.constant dense<3> : tensor<i32>
  %key2 = spmd.random_fold_in %key, %step : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  // CHECK: spmd.embedding %{{.*}}, %{{.*}} : (tensor<6x5xf32>, tensor<2xi32>) -> tensor<2x5xf32>
  %emb = spmd.embedding %m, %key : (tensor<6x5xf32>, tensor<2xi32>) -> tensor<2x5xf32>
  // CHECK: spmd.embedding_backward %{{.*}}, %{{.*}} : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<6x5xf32>
  %embg = spmd.embedding_backward %emb, %key : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<6x5xf32>
  // CHECK: spmd.take_along_axis %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<6x5xf32>, tensor<6x2xi32>) -> tensor<6x2xf32>
  %picks = spmd.constant dense<[[0, 4], [1, 1], [2, 0], [3, 3], [4, 2], [0, 0]]> : tensor<6x2xi32>
  %tk = spmd.take_along_axis %m, %picks {axis = 1} : (tensor<6x5xf32>, tensor<6x2xi32>) -> tensor<6x2xf32>
  // CHECK: spmd.take_along_axis_backward %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x5xf32>
  %tkg = spmd.take_along_axis_backward %tk, %picks {axis = 1} : (tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x5xf32>
  // CHECK: spmd.segment_reduce %{{.*}}, %{{.*}} {reduction = #spmd.reduction<max>} : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<4x2xf32>
  %segids = spmd.constant dense<[3, 0, 3, 1, 0, 2]> : tensor<6xi32>
  %seg = spmd.segment_reduce %tk, %segids {reduction = #spmd.reduction<max>} : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<4x2xf32>
  // CHECK: spmd.scatter %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<6x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x5xf32>
  %sc = spmd.scatter %m, %picks, %tk {axis = 1} : (tensor<6x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.scatter_reduce %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64, reduction = #spmd.reduction<min>} : (tensor<6x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x5xf32>
  %sr = spmd.scatter_reduce %m, %picks, %tk {axis = 1, reduction = #spmd.reduction<min>} : (tensor<6x5xf32>, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.slice %{{.*}} {limit = array<i64: 4, 5>, start = array<i64: 1, 0>} : (tensor<6x5xf32>) -> tensor<3x5xf32>
  %sl = spmd.slice %m {start = array<i64: 1, 0>, limit = array<i64: 4, 5>} : (tensor<6x5xf32>) -> tensor<3x5xf32>
  // CHECK: spmd.pad %{{.*}} : (tensor<3x5xf32>) -> tensor<6x6xf32>
  %pd = spmd.pad %sl {low = array<i64: 1, 0>, high = array<i64: 2, 1>} : (tensor<3x5xf32>) -> tensor<6x6xf32>
  // CHECK: spmd.concatenate %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<6x5xf32>, tensor<3x5xf32>) -> tensor<9x5xf32>
  %cc = spmd.concatenate %m, %sl {axis = 0 : i64} : (tensor<6x5xf32>, tensor<3x5xf32>) -> tensor<9x5xf32>
  // CHECK: spmd.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %se = spmd.select %sm, %m, %lsm : (tensor<6x5xf32>, tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.convert %{{.*}} : (tensor<2xi32>) -> tensor<2xf64>
  %keyf = spmd.convert %key : (tensor<2xi32>) -> tensor<2xf64>
  // CHECK: spmd.random_uniform %{{.*}} : (tensor<2xi32>) -> tensor<6x5xf32>
  %noise = spmd.random_uniform %key2 : (tensor<2xi32>) -> tensor<6x5xf32>
  // CHECK: spmd.log
  %u2 = spmd.log %u1 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.sqrt
  %u3 = spmd.sqrt %u2 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.relu
  %r = spmd.relu %u3 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.broadcast_in_dim %{{.*}} {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %bc = spmd.broadcast_in_dim %c {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.transpose %{{.*}} {perm = array<i64: 0, 2, 3, 1>}
  %t = spmd.transpose %bc {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: spmd.reduce_sum %{{.*}} {axes = array<i64: 2, 3>} : (tensor<2x4x4x4xf32>) -> tensor<2x4xf32>
  %rs = spmd.reduce_sum %t {axes = array<i64: 2, 3>} : (tensor<2x4x4x4xf32>) -> tensor<2x4xf32>
  // CHECK: spmd.reduce_mean
  %rm = spmd.reduce_mean %r {axes = array<i64: 2, 3>} : (tensor<2x4x4x4xf32>) -> tensor<2x4xf32>
  // CHECK: spmd.reduce_max
  %rx = spmd.reduce_max %rm {axes = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<4xf32>
  // CHECK: spmd.reshape %{{.*}} : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  %flat = spmd.reshape %r : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  // CHECK: spmd.argmax %{{.*}} {axis = 1 : i64} : (tensor<2x64xf32>) -> tensor<2xi32>
  %am = spmd.argmax %flat {axis = 1} : (tensor<2x64xf32>) -> tensor<2xi32>
  // CHECK: spmd.argsort %{{.*}} {axis = 1 : i64} : (tensor<2x64xf32>) -> tensor<2x64xi32>
  %as = spmd.argsort %flat {axis = 1} : (tensor<2x64xf32>) -> tensor<2x64xi32>
  // CHECK: spmd.argsort %{{.*}} {axis = 0 : i64, descending = true} : (tensor<2x64xf32>) -> tensor<2x64xi32>
  %ad = spmd.argsort %flat {axis = 0, descending = true} : (tensor<2x64xf32>) -> tensor<2x64xi32>
  // CHECK: spmd.matmul %{{.*}}, %{{.*}} : (tensor<6x5xf32>, tensor<5x7xf32>) -> tensor<6x7xf32>
  %mm = spmd.matmul %m, %n : (tensor<6x5xf32>, tensor<5x7xf32>) -> tensor<6x7xf32>
  // CHECK: spmd.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<6x7xf32>, tensor<5x7xf32>) -> tensor<6x5xf32>
  %mt = spmd.matmul %mm, %n {transpose_rhs = true} : (tensor<6x7xf32>, tensor<5x7xf32>) -> tensor<6x5xf32>
  // CHECK: spmd.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<6xf32>
  %loss = spmd.softmax_cross_entropy %mt, %labels : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<6xf32>
  return %loss : tensor<6xf32>
}

// CHECK-LABEL: func.func @fused
func.func @fused(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  // CHECK: %[[F:.*]]:2 = spmd.fused %arg0, %arg1 {
  // CHECK: spmd.broadcast_in_dim %{{.*}} {dims = array<i64: 1>}
  // CHECK: spmd.constant dense<5.000000e-01> : tensor<2x3xf32>
  // CHECK: spmd.yield %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK: } : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  %r:2 = spmd.fused %x, %b {
  ^bb0(%a: tensor<2x3xf32>, %c: tensor<3xf32>):
    %cb = spmd.broadcast_in_dim %c {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
    %h = spmd.constant dense<0.5> : tensor<2x3xf32>
    %s = spmd.add %a, %cb : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %m = spmd.mul %s, %h : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %y = spmd.relu %m : (tensor<2x3xf32>) -> tensor<2x3xf32>
    spmd.yield %y, %s : tensor<2x3xf32>, tensor<2x3xf32>
  } : (tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// A user's op (frontend/CustomOp.h): its registered name, its attributes as text, any number of
// inputs and results; it parses and prints without the registration.
// CHECK-LABEL: func.func @custom_call
func.func @custom_call(%x: tensor<2x3xf32>, %i: tensor<2xi32>) -> (tensor<2x3xf32>, tensor<3xf32>) {
  // CHECK: %{{.*}}:2 = spmd.custom_call "mylib.split"(%arg0, %arg1) {config = "axis=1;mode=fast%3Bsafe"} : (tensor<2x3xf32>, tensor<2xi32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  %r:2 = spmd.custom_call "mylib.split"(%x, %i) {config = "axis=1;mode=fast%3Bsafe"} : (tensor<2x3xf32>, tensor<2xi32>) -> (tensor<2x3xf32>, tensor<3xf32>)
  // CHECK: spmd.custom_call "mylib.id"(%{{.*}}) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = spmd.custom_call "mylib.id"(%r#0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %s, %r#1 : tensor<2x3xf32>, tensor<3xf32>
}

// A dilated, grouped convolution and its gradients (absent dilation and groups mean 1).
// CHECK-LABEL: func.func @conv_options
func.func @conv_options(%x: tensor<2x6x8x8xf32>, %w: tensor<6x2x3x3xf32>, %dy: tensor<2x6x4x8xf32>) -> (tensor<2x6x4x8xf32>, tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32>) {
  // CHECK: spmd.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 2, 1>, groups = 3 : i64, padding = array<i64: 0, 1>, stride = array<i64: 1, 1>} : (tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x8xf32>
  %y = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 1>, dilation = array<i64: 2, 1>, groups = 3 : i64} : (tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x8xf32>
  // CHECK: spmd.conv2d_backward_data %{{.*}}, %{{.*}} {dilation = array<i64: 2, 1>, groups = 3 : i64, padding = array<i64: 0, 1>, stride = array<i64: 1, 1>}
  %dx = spmd.conv2d_backward_data %dy, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 1>, dilation = array<i64: 2, 1>, groups = 3 : i64} : (tensor<2x6x4x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x8x8xf32>
  // CHECK: spmd.conv2d_backward_filter %{{.*}}, %{{.*}} {dilation = array<i64: 2, 1>, groups = 3 : i64, padding = array<i64: 0, 1>, stride = array<i64: 1, 1>}
  %dw = spmd.conv2d_backward_filter %x, %dy {stride = array<i64: 1, 1>, padding = array<i64: 0, 1>, dilation = array<i64: 2, 1>, groups = 3 : i64} : (tensor<2x6x8x8xf32>, tensor<2x6x4x8xf32>) -> tensor<6x2x3x3xf32>
  return %y, %dx, %dw : tensor<2x6x4x8xf32>, tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32>
}
