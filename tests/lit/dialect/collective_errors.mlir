// Collectives verify their axis: it must be bound by the enclosing function (spmd::pmap sets
// spmd.axis_name / spmd.axis_size), and shapes must agree with the axis size.
// RUN: spmd-opt %s --split-input-file --verify-diagnostics

func.func @unbound(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'spmd.all_reduce' op runs over axis 'batch', but no axis is bound here: collectives only work inside a function mapped by spmd::pmap (func attribute spmd.axis_name)}}
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @other_axis(%x: tensor<3xf32>) -> tensor<i32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{'spmd.axis_index' op runs over axis 'model', but the enclosing spmd::pmap binds axis 'batch'; use that name (or nest a pmap over 'model')}}
  %i = spmd.axis_index {axis_name = "model"} : tensor<i32>
  return %i : tensor<i32>
}

// -----

func.func @gather_size(%x: tensor<3xf32>) -> tensor<4x3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{'spmd.all_gather' op axis_size 4 differs from the size 2 of axis 'batch'}}
  %y = spmd.all_gather %x {axis_name = "batch", axis_size = 4 : i64} : (tensor<3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// With gradient accumulation (2 micro-batches per device) a gather may span the axis' 4 replicas
// or its 2 devices (the sliced parameters'), nothing else.
func.func @gather_size_accumulated(%x: tensor<3xf32>) -> tensor<3x3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64, spmd.micro_batches = 2 : i64} {
  %ok = spmd.all_gather %x {axis_name = "batch", axis_size = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
  // expected-error @+1 {{'spmd.all_gather' op axis_size 3 differs from the size 4 of axis 'batch' or 2 (its devices, over which accumulation's sliced parameters are cut)}}
  %y = spmd.all_gather %x {axis_name = "batch", axis_size = 3 : i64} : (tensor<3xf32>) -> tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}

// -----

func.func @scatter_rows(%x: tensor<3x5xf32>) -> tensor<5xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{'spmd.reduce_scatter' op input 'tensor<3x5xf32>' must have a leading axis of size 2 (the size of axis 'batch')}}
  %y = spmd.reduce_scatter %x {axis_name = "batch"} : (tensor<3x5xf32>) -> tensor<5xf32>
  return %y : tensor<5xf32>
}

// -----

// A reduce_scatter sums or averages (psumScatter, ZeRO-1's gradient mean); max and min are refused.
func.func @scatter_max(%x: tensor<2x5xf32>) -> tensor<5xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{'spmd.reduce_scatter' op reduction max is not one a reduce_scatter takes (sum or mean)}}
  %y = spmd.reduce_scatter %x {axis_name = "batch", reduction = #spmd.reduction<max>} : (tensor<2x5xf32>) -> tensor<5xf32>
  return %y : tensor<5xf32>
}

// -----

// The mean of integers is refused (spmd::pmean of i32 sums, then divides in f32); their sum is kept.
func.func @integer_mean(%x: tensor<2x5xi32>) -> (tensor<5xi32>, tensor<2x5xi32>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %s = spmd.reduce_scatter %x {axis_name = "batch"} : (tensor<2x5xi32>) -> tensor<5xi32>
  // expected-error @+1 {{'spmd.all_reduce' op takes the mean of the integer tensor 'tensor<2x5xi32>', which is not an integer; reduce with sum and divide in a float type (spmd::pmean of an i32 tensor does: it returns the f32 mean)}}
  %m = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x5xi32>) -> tensor<2x5xi32>
  return %s, %m : tensor<5xi32>, tensor<2x5xi32>
}

// -----

func.func @integer_scatter_mean(%x: tensor<2x5xi32>) -> tensor<5xi32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{'spmd.reduce_scatter' op takes the mean of the integer tensor 'tensor<2x5xi32>'}}
  %y = spmd.reduce_scatter %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<2x5xi32>) -> tensor<5xi32>
  return %y : tensor<5xi32>
}

// -----

// A reduction is a typed attribute; the string the dialect once took is refused, naming the form.
func.func @reduction(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+1 {{attribute 'reduction' failed to satisfy constraint: a reduction: #spmd.reduction<sum>, <mean>, <max> or <min>}}
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = "sum"} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @mixed_types(%x: tensor<3xf32>, %y: tensor<3xf64>) -> (tensor<3xf32>, tensor<3xf64>)
    attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  // expected-error @+2 {{spmd.all_reduce: every operand has element type f64 but must match f32}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %b = spmd.all_reduce %x, %y {axis_name = "batch", reduction = #spmd.reduction<sum>} : (tensor<3xf32>, tensor<3xf64>) -> (tensor<3xf32>, tensor<3xf64>)
  return %a, %b : tensor<3xf32>, tensor<3xf64>
}

// -----

// ppermute's pairs: flattened (source, destination) pairs, replicas of the axis, each replica
// sending once and receiving at most once.
func.func @ppermute_odd(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.ppermute' op pairs must be (source, destination) pairs, flattened, but has 3 entries}}
  %y = spmd.ppermute %x {axis_name = "batch", pairs = array<i64: 0, 1, 2>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @ppermute_range(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.ppermute' op pair (3, 4) names replica 4, but axis 'batch' has replicas 0..3}}
  %y = spmd.ppermute %x {axis_name = "batch", pairs = array<i64: 3, 4>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @ppermute_two_sends(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.ppermute' op replica 0 is the source of two pairs; each replica sends once}}
  %y = spmd.ppermute %x {axis_name = "batch", pairs = array<i64: 0, 1, 0, 2>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @ppermute_two_receives(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.ppermute' op replica 2 is the destination of two pairs; each replica receives at most once}}
  %y = spmd.ppermute %x {axis_name = "batch", pairs = array<i64: 0, 2, 1, 2>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @groups_without_size(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_reduce' op replica_groups and group_size come together (one is missing)}}
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 2, 3>} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @groups_repeat_a_replica(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_reduce' op replica_groups names replica 1 twice; each of the axis' replicas 0..3 belongs to exactly one group}}
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 1, 3>, group_size = 2 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @groups_uneven(%x: tensor<3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_reduce' op replica_groups must hold each of the axis' 4 replicas once, in groups of group_size 3 (a divisor of 4), but has 4 entries}}
  %y = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<sum>, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 3 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @gather_within_groups_size(%x: tensor<3xf32>) -> tensor<4x3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_gather' op axis_size 4 differs from group_size 2: within groups a replica stacks its group's operands}}
  %y = spmd.all_gather %x {axis_name = "batch", axis_size = 4 : i64, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 2 : i64} : (tensor<3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @scatter_within_groups_mean(%x: tensor<2x3xf32>) -> tensor<3xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.reduce_scatter' op within replica groups a reduce_scatter sums (reduction sum)}}
  %y = spmd.reduce_scatter %x {axis_name = "batch", reduction = #spmd.reduction<mean>, replica_groups = array<i64: 0, 1, 2, 3>, group_size = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}

// -----

func.func @all_to_all_within_groups_size(%x: tensor<4x3xf32>) -> tensor<1x12xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_to_all' op axis_size 4 differs from group_size 2: within groups a replica exchanges chunks with its group's members}}
  %y = spmd.all_to_all %x {axis_name = "batch", axis_size = 4 : i64, split_axis = 0 : i64, concat_axis = 1 : i64, replica_groups = array<i64: 0, 2, 1, 3>, group_size = 2 : i64} : (tensor<4x3xf32>) -> tensor<1x12xf32>
  return %y : tensor<1x12xf32>
}

// -----

func.func @all_to_all_groups_without_size(%x: tensor<4x3xf32>) -> tensor<2x6xf32>
    attributes {spmd.axis_name = "batch", spmd.axis_size = 4 : i64} {
  // expected-error @+1 {{'spmd.all_to_all' op replica_groups and group_size come together (one is missing)}}
  %y = spmd.all_to_all %x {axis_name = "batch", axis_size = 2 : i64, split_axis = 0 : i64, concat_axis = 1 : i64, replica_groups = array<i64: 0, 2, 1, 3>} : (tensor<4x3xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}
