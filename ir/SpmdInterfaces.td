// How `spmd` ops are differentiated: the VJP op interface every differentiable op implements
// (rules in SpmdVjpRules.cpp), and the two explicit marks for ops that have no VJP rule.
#ifndef SPMD_INTERFACES_TD
#define SPMD_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Spmd_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::spmd::ir";
  let description = [{
    The op's vector-Jacobian product: given a cotangent for each result (a null Value when a
    result has none, i.e. it does not reach the loss), build ops computing a cotangent for each
    operand (null for operands that are not differentiable, such as integer labels). The
    builder's insertion point and the op's location are set by the caller; rules emit only
    `spmd` ops, so their output is ordinary IR that later passes optimize.
  }];
  let methods = [
    InterfaceMethod<"Builds the cotangents of the operands from those of the results.",
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder&":$builder, "::mlir::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value>&":$operandGrads)>
  ];
}

// The op's gradient is zero wherever it is defined (argmax, comparisons): autodiff sends no
// cotangent through it.
def Spmd_ZeroGradient : NativeOpTrait<"ZeroGradient"> { let cppNamespace = "::spmd::ir"; }

// A backward op emitted by a VJP rule. Differentiating it (a second derivative) is not
// supported; autodiff reports that at the op's source line instead of guessing.
def Spmd_FirstOrderOnly : NativeOpTrait<"FirstOrderOnly"> { let cppNamespace = "::spmd::ir"; }

#endif
