// spmd-mark-remat: candidates are runs of consecutive forward ops sharing their layer path up to
// two components (stage1.0 and stage1.1 here; "fc" alone is one op, and an op the user already
// checkpointed is in none), scored by the bytes they define before their last op: stage1.1
// (two 16-element values = 128 bytes) before stage1.0 (one = 64 bytes). segments=1 marks only
// the larger, segments=-1 both; the choice is recorded on the function.
// RUN: spmd-opt %s --spmd-mark-remat="segments=1" | FileCheck %s --check-prefix=ONE
// RUN: spmd-opt %s --spmd-mark-remat | FileCheck %s --check-prefix=ALL
// RUN: spmd-opt %s --spmd-mark-remat="segments=0" | FileCheck %s --check-prefix=NONE

// ONE: func.func @step{{.*}}attributes {spmd.remat_chosen = ["stage1.1"]}
// ONE: spmd.exp %{{.*}} : (tensor<16xf32>)
// ONE-NEXT: spmd.tanh %{{.*}} : (tensor<16xf32>)
// ONE-NEXT: spmd.exp %{{.*}} {spmd.remat = 1 : i64}
// ONE-NEXT: spmd.tanh %{{.*}} {spmd.remat = 1 : i64}
// ONE-NEXT: spmd.exp %{{.*}} {spmd.remat = 1 : i64}
// ONE-NEXT: spmd.exp %{{.*}} {spmd.remat = 0 : i64}
// ONE-NEXT: spmd.tanh %{{.*}} {spmd.remat = 0 : i64}
// ONE-NEXT: spmd.reduce_sum %{{.*}} : (tensor<16xf32>)

// ALL: func.func @step{{.*}}attributes {spmd.remat_chosen = ["stage1.1", "stage1.0"]}
// ALL: spmd.exp %{{.*}} {spmd.remat = 2 : i64}
// ALL-NEXT: spmd.tanh %{{.*}} {spmd.remat = 2 : i64}
// ALL-NEXT: spmd.exp %{{.*}} {spmd.remat = 1 : i64}

// NONE: func.func @step{{.*}}attributes {spmd.remat_chosen = []}
// NONE-NOT: spmd.remat =
// NONE: spmd.exp %{{.*}} {spmd.remat = 0 : i64}
func.func @step(%x: tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>) {
  %l, %g = spmd.value_and_grad %x {
  ^bb0(%a: tensor<16xf32>):
    %e = spmd.exp %a : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.0.conv1"("model.cpp":10:1))
    %t = spmd.tanh %e : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.0"("model.cpp":11:1))
    %e2 = spmd.exp %t : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.1.conv1"("model.cpp":10:1))
    %t2 = spmd.tanh %e2 : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.1.bn1"("model.cpp":12:1))
    %e3 = spmd.exp %t2 : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.1"("model.cpp":11:1))
    %u = spmd.exp %e3 {spmd.remat = 0 : i64} : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.1"("model.cpp":20:1))
    %v = spmd.tanh %u {spmd.remat = 0 : i64} : (tensor<16xf32>) -> tensor<16xf32> loc("stage1.1"("model.cpp":21:1))
    %s = spmd.reduce_sum %v {axes = array<i64: 0>} : (tensor<16xf32>) -> tensor<f32> loc("fc"("model.cpp":30:1))
    spmd.yield %s : tensor<f32>
  } : (tensor<16xf32>) -> (tensor<f32>, tensor<16xf32>)
  return %l, %g : tensor<f32>, tensor<16xf32>
}
