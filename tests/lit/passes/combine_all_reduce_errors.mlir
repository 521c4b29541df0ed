// spmd-combine-all-reduce: its option is user input too; a bucket size below one byte is an error.
// RUN: not spmd-opt %s --spmd-combine-all-reduce=bucket-bytes=-5 2>&1 | FileCheck %s
// RUN: not spmd-opt %s --spmd-combine-all-reduce=bucket-bytes=0 2>&1 | FileCheck %s --check-prefix=ZERO

// CHECK: error: spmd-combine-all-reduce: bucket-bytes is -5; give a positive number of bytes (the largest combined all_reduce)
// ZERO: error: spmd-combine-all-reduce: bucket-bytes is 0; give a positive number of bytes
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {spmd.axis_name = "batch", spmd.axis_size = 2 : i64} {
  %a = spmd.all_reduce %x {axis_name = "batch", reduction = #spmd.reduction<mean>} : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}
