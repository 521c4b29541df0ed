// Each op's verifier rejects bad shapes, attributes and types with a message naming them.
// RUN: spmd-opt %s -split-input-file -verify-diagnostics

func.func @conv_channels(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{has 3 channels but filter tensor<4x2x3x3xf32> expects 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<2x6x8x8xf32>, %w: tensor<8x2x3x3xf32>) {
  // expected-error @+2 {{groups 4 must be positive and divide the input's 6 channels and the filter's 8 outputs}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, groups = 4 : i64} : (tensor<2x6x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<2x8x6x6xf32>
  return
}

// -----

func.func @conv_dilation(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{filter tensor<4x3x3x3xf32> dilated by [4, 1] is larger than the padded input}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 4, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{stride must be two positive integers, got [0, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {stride = array<i64: 0, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{bias tensor<5xf32> must have one entry per channel (4)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<5xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_result(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x4x6x6xf32>' are incompatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @bn_train_scale(%x: tensor<2x3x4x4xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{scale tensor<4xf32> must have one entry per channel (3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r:3 = spmd.batch_norm_train %x, %s, %s {epsilon = 1.0e-5 : f64} : (tensor<2x3x4x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @bn_train_mask(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %m: tensor<3xf32>) {
  // expected-error @+2 {{mask tensor<3xf32> must have one entry per example (2) of input tensor<2x3x4x4xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r:3 = spmd.batch_norm_train %x, %s, %s, %m {epsilon = 1.0e-5 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @bn_infer_eps(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be a positive finite float, got 0.000000}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.batch_norm_infer %x, %s, %s, %s, %s {epsilon = 0.0 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @bn_infer_eps_nan(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{epsilon must be a positive finite float, got nan}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.batch_norm_infer %x, %s, %s, %s, %s {epsilon = 0x7FF8000000000000 : f64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @conv_groups_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{groups 0 must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.conv2d %x, %w {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>, groups = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @argmax_empty_axis(%x: tensor<0x5xf32>) {
  // expected-error @+2 {{axis 0 of tensor<0x5xf32> is empty: an empty axis has no largest element}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.argmax %x {axis = 0 : i64} : (tensor<0x5xf32>) -> tensor<5xi32>
  return
}

// -----

func.func @bn_train_no_values(%x: tensor<0x3x4x4xf32>, %s: tensor<3xf32>) {
  // expected-error @+2 {{holds no value per channel}}
  // expected-error @+1 {{failed to infer returned types}}
  %r:3 = spmd.batch_norm_train %x, %s, %s {epsilon = 1.0e-5 : f64} : (tensor<0x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<0x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @add(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sub(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.sub %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @mul(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @div(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @max(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @neg(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.neg %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @exp(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.exp %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @log(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.log %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @sqrt(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.sqrt %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @relu(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %r = spmd.relu %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @int_relu(%a: tensor<2xi32>) {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type values}}
  %r = spmd.relu %a : (tensor<2xi32>) -> tensor<2xi32>
  return
}

// -----

func.func @broadcast(%a: tensor<3xf32>) {
  // expected-error @+1 {{input dim 0 must be 1 or equal result dim 0}}
  %r = spmd.broadcast_in_dim %a {dims = array<i64: 0>} : (tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reshape(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<7xf32>' (7 elements)}}
  %r = spmd.reshape %a : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @transpose(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{perm [0, 0] is not a permutation of the 2 dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.transpose %a {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @reduce_sum(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_sum %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_mean(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_mean %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_max(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_max %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_order(%a: tensor<2x3x4xf32>) {
  // expected-error @+2 {{axes [2, 0] must be sorted and unique}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_sum %a {axes = array<i64: 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @argmax(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.argmax %a {axis = -1} : (tensor<2x3xf32>) -> tensor<2xi32>
  return
}

// -----

func.func @argsort(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.argsort %a {axis = 2} : (tensor<2x3xf32>) -> tensor<2x3xi32>
  return
}

// -----

func.func @take_along_axis(%a: tensor<2x3xf32>, %i: tensor<3x2xi32>) {
  // expected-error @+2 {{indices tensor<3x2xi32> and input tensor<2x3xf32> differ on axis 0, which is not the axis taken along (1): broadcast the indices to input's size there}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.take_along_axis %a, %i {axis = 1} : (tensor<2x3xf32>, tensor<3x2xi32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @take_along_axis_rank(%a: tensor<2x3xf32>, %i: tensor<2xi32>) {
  // expected-error @+2 {{indices tensor<2xi32> must have input tensor<2x3xf32>'s rank 2 (add size-1 axes: reshape them)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.take_along_axis %a, %i {axis = 1} : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<2xf32>
  return
}

// -----

func.func @scatter_updates(%a: tensor<2x3xf32>, %i: tensor<2x2xi32>, %u: tensor<2x3xf32>) {
  // expected-error @+2 {{updates tensor<2x3xf32> must have the shape of indices tensor<2x2xi32> and the element type of input tensor<2x3xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.scatter %a, %i, %u {axis = 1} : (tensor<2x3xf32>, tensor<2x2xi32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @segment_reduce_rows(%d: tensor<5x2xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{data tensor<5x2xf32> must be [N, W] with segment_ids tensor<4xi32> [N], and the result tensor<3x2xf32> [segments, W] of data's type}}
  %r = spmd.segment_reduce %d, %i {reduction = #spmd.reduction<min>} : (tensor<5x2xf32>, tensor<4xi32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @segment_reduce_mean(%d: tensor<4x2xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{reduction must be max or min (segment sums are embedding_backward)}}
  %r = spmd.segment_reduce %d, %i {reduction = #spmd.reduction<mean>} : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @scatter_reduce_sum(%a: tensor<2x3xf32>, %i: tensor<2x2xi32>, %u: tensor<2x2xf32>) {
  // expected-error @+2 {{reduction must be max or min, got sum: a sum is scatter-add, spmd::scatterAdd}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.scatter_reduce %a, %i, %u {axis = 1, reduction = #spmd.reduction<sum>} : (tensor<2x3xf32>, tensor<2x2xi32>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_reduce_axis(%a: tensor<2x3xf32>, %i: tensor<3x2xi32>, %u: tensor<3x2xf32>) {
  // expected-error @+2 {{indices tensor<3x2xi32> and input tensor<2x3xf32> differ on axis 0, which is not the axis scattered along (1): broadcast the indices and updates to input's size there}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.scatter_reduce %a, %i, %u {axis = 1, reduction = #spmd.reduction<max>} : (tensor<2x3xf32>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @take_along_axis_backward(%g: tensor<2x2xf32>, %i: tensor<2x2xi32>) {
  // expected-error @+1 {{result_grad tensor<2x2xf32> must be take_along_axis of input_grad tensor<3x3xf32> at indices tensor<2x2xi32> along axis 1}}
  %r = spmd.take_along_axis_backward %g, %i {axis = 1} : (tensor<2x2xf32>, tensor<2x2xi32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{contracting dims differ: lhs tensor<2x3xf32> gives 3, rhs tensor<4x5xf32> gives 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_dtype(%a: tensor<2x3xf32>, %b: tensor<3x5xf64>) {
  // expected-error @+2 {{rhs has element type f64 but must match f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf64>) -> tensor<2x5xf32>
  return
}

// -----

func.func @xent(%a: tensor<4x10xf32>, %l: tensor<3xi32>) {
  // expected-error @+2 {{labels tensor<3xi32> must have one entry per row of logits tensor<4x10xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.softmax_cross_entropy %a, %l : (tensor<4x10xf32>, tensor<3xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @xent_labels(%a: tensor<4x10xf32>, %l: tensor<4xf32>) {
  // expected-error @+1 {{must be ranked tensor of 32-bit signless integer values}}
  %r = spmd.softmax_cross_entropy %a, %l : (tensor<4x10xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @constant() {
  // expected-error @+1 {{must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type or 32-bit signless integer values}}
  %r = spmd.constant dense<1.0> : tensor<2xf16>
  return
}

// -----

func.func @pool_padding(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+2 {{padding must be two integers in [0, window), got [2, 2] for window [2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reduction = #spmd.reduction<max>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 2, 2>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x6x6xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<3x8x8xf32>) {
  // expected-error @+2 {{input (N, C, H, W) must have rank 4, got tensor<3x8x8xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reduction = #spmd.reduction<mean>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<3x8x8xf32>) -> tensor<3x4x4xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<2x3x4x4xf32>) {
  // expected-error @+2 {{window [5, 5] is larger than the padded input tensor<2x3x4x4xf32> (padding [0, 0])}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reduction = #spmd.reduction<max>, window = array<i64: 5, 5>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32>
  return
}

// -----

func.func @window_only_padding(%x: tensor<1x1x2x4xf32>) {
  // expected-error @+2 {{window 1 along dim 2 of tensor<1x1x2x4xf32> holds only padding (window [2, 2], dilation [3, 1], padding [2, 0]); lower the padding or the dilation}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reduction = #spmd.reduction<max>, window = array<i64: 2, 2>, stride = array<i64: 1, 1>, padding = array<i64: 2, 0>, dilation = array<i64: 3, 1>, count_include_pad = true} : (tensor<1x1x2x4xf32>) -> tensor<1x1x3x3xf32>
  return
}

// -----

func.func @window_min(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+2 {{min is not a window reduction (max, sum or mean)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.reduce_window %x {reduction = #spmd.reduction<min>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @window_backward_input(%dy: tensor<2x3x4x4xf32>, %x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{sum and mean take result_grad alone, not the forward's input}}
  %r = spmd.reduce_window_backward %dy, %x {reduction = #spmd.reduction<mean>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @pool_backward_shape(%dy: tensor<2x3x3x3xf32>, %x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{result_grad tensor<2x3x3x3xf32> does not match the forward reduce_window output [2, 3, 4, 4] of input tensor<2x3x8x8xf32>}}
  %r = spmd.reduce_window_backward %dy, %x {reduction = #spmd.reduction<max>, window = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, count_include_pad = true} : (tensor<2x3x3x3xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{axis 2 is out of range for tensor<4x5xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.softmax %x {axis = 2 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @random_key_shape(%k: tensor<3xi32>) {
  // expected-error @+1 {{key must be tensor<2xi32> (from spmd::random::key), got tensor<3xi32>}}
  %r = spmd.random_uniform %k : (tensor<3xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x5xf32>) {
  // expected-error @+2 {{batch dims differ: lhs tensor<2x3x4xf32>, rhs tensor<3x4x5xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @convert_shape(%x: tensor<4x5xf32>) {
  // expected-error @+1 {{the result tensor<20xi32> must have the input's shape tensor<4x5xf32>}}
  %r = spmd.convert %x : (tensor<4x5xf32>) -> tensor<20xi32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x5xf32>) {
  // expected-error @+2 {{dim 1: [2, 7) is not inside [0, 5) of tensor<4x5xf32>}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.slice %x {start = array<i64: 0, 2>, limit = array<i64: 4, 7>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @concat_dims(%a: tensor<4x5xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{input 1 tensor<3x4xf32> differs from input 0 tensor<4x5xf32> in dim 1 (only dim 0 may differ)}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = spmd.concatenate %a, %b {axis = 0 : i64} : (tensor<4x5xf32>, tensor<3x4xf32>) -> tensor<7x5xf32>
  return
}

// -----

func.func @relayout_same(%x: tensor<2x16x4x4xf32>) {
  // expected-error @+1 {{converts a tensor to the layout it has}}
  %r = spmd.relayout %x : (tensor<2x16x4x4xf32>) -> tensor<2x16x4x4xf32>
  return
}

// -----

func.func @relayout_channels(%x: tensor<2x12x4x4xf32>) {
  // expected-error @+1 {{layout nChw8c needs channels a multiple of 8, got}}
  %r = spmd.relayout %x : (tensor<2x12x4x4xf32>) -> tensor<2x12x4x4xf32, "nChw8c">
  return
}

// -----

func.func @relayout_unknown(%x: tensor<2x16x4x4xf32>) {
  // expected-error @+1 {{unknown tensor layout 'NHWC'}}
  %r = spmd.relayout %x : (tensor<2x16x4x4xf32>) -> tensor<2x16x4x4xf32, "NHWC">
  return
}

// -----

func.func @relayout_channels_last_rank(%x: tensor<6x16xf32>) {
  // expected-error @+1 {{layout nhwc needs a rank-4 NCHW tensor, got}}
  %r = spmd.relayout %x : (tensor<6x16xf32>) -> tensor<6x16xf32, "nhwc">
  return
}

// -----

func.func @relayout_shape(%x: tensor<2x16x4x4xf32>) {
  // expected-error @+1 {{must keep the shape and element type}}
  %r = spmd.relayout %x : (tensor<2x16x4x4xf32>) -> tensor<2x16x4x8xf32, "nChw8c">
  return
}

// -----

func.func @custom_call_unnamed(%x: tensor<2xf32>) {
  // expected-error @+1 {{needs the name of a registered custom op in `target`}}
  %r = spmd.custom_call ""(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @custom_call_no_result(%x: tensor<2xf32>) {
  // expected-error @+1 {{'mylib.sink' must have at least one result}}
  spmd.custom_call "mylib.sink"(%x) : (tensor<2xf32>) -> ()
  return
}
