// spmd-opt registers MLIR's --view-op-graph: a dump drawn as a Graphviz graph, one node per op
// (its name and result type), edges along the values.
// RUN: spmd-opt %s --view-op-graph -o /dev/null 2>&1 | FileCheck %s

// CHECK: digraph G {
// CHECK-DAG: label = "spmd.mul
// CHECK-DAG: label = "spmd.reduce_sum
// CHECK: ->
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {
  %y = spmd.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = spmd.reduce_sum %y {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
