// The dialect's enum attributes: typed mirrors of the Program contract's kinds
// (runtime/program/Catalog.h), spelled as the runtime spells them; OpCoverageTest checks that
// the two agree case by case.
#ifndef SPMD_ENUMS_TD
#define SPMD_ENUMS_TD

include "ir/SpmdDialect.td"
include "mlir/IR/EnumAttr.td"

def Spmd_ReductionSum : I32EnumAttrCase<"Sum", 0, "sum">;
def Spmd_ReductionMean : I32EnumAttrCase<"Mean", 1, "mean">;
def Spmd_ReductionMax : I32EnumAttrCase<"Max", 2, "max">;
def Spmd_ReductionMin : I32EnumAttrCase<"Min", 3, "min">;
def Spmd_Reduction : I32EnumAttr<"Reduction", "a reduction: #spmd.reduction<sum>, <mean>, <max> or <min>",
    [Spmd_ReductionSum, Spmd_ReductionMean, Spmd_ReductionMax, Spmd_ReductionMin]> {
  let cppNamespace = "::spmd::ir";
  let genSpecializedAttr = 0;
}
// Written #spmd.reduction<sum> in the IR.
def Spmd_ReductionAttr : EnumAttr<Spmd_Dialect, Spmd_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif
