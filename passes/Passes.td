// Every pass of the spmd pipeline, one def each; each is implemented in passes/<Name>.cpp and
// runs by itself in spmd-opt (`spmd-opt in.mlir --spmd-autodiff`).
#ifndef SPMD_PASSES_TD
#define SPMD_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"spmd-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode autodiff: expand spmd.value_and_grad into forward and VJP ops";
  let description = [{
    Replaces each `spmd.value_and_grad` with its body's ops followed by the backward sweep:
    walking the body in reverse, every op that depends on a differentiated argument and feeds
    the loss contributes its VJP (the op's VjpOpInterface rule); cotangents reaching a value
    along several uses are summed. Inner value_and_grad ops expand first. An op on the path
    with no VJP rule is an error at its source location.
  }];
  let dependentDialects = ["::spmd::ir::SpmdDialect"];
}

#endif
