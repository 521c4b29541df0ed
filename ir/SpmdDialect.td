// The `spmd` dialect: declaration and the tensor type constraints its ops share.
// Ops live in SpmdOps.td; each op is defined once there.
#ifndef SPMD_DIALECT_TD
#define SPMD_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Spmd_Dialect : Dialect {
  let name = "spmd";
  let cppNamespace = "::spmd::ir";
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  let summary = "High-level tensor ops for SPMD training steps";
  let description = [{
    Ops that map to one library call (oneDNN, cuDNN, cuBLAS) or one fused kernel. Layout is NCHW;
    every op's result shape follows from its operands and attributes (InferTypeOpInterface), and
    the shape rule doubles as the verifier, so a bad op names its shapes and its source location.
  }];
}

def Spmd_FloatTensor : RankedTensorOf<[F32, F64, BF16]>;
def Spmd_IndexTensor : RankedTensorOf<[I32]>;
def Spmd_AnyTensor : RankedTensorOf<[F32, F64, BF16, I32]>;

#endif
