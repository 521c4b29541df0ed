// Layout encodings on tensor types and the verifier of spmd.relayout.
#include "ir/Layout.h"
#include "ir/SpmdDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "runtime/program/Layouts.h"

using namespace mlir;

namespace spmd::ir {

llvm::StringRef layoutOf(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  auto encoding = tensor ? llvm::dyn_cast_or_null<StringAttr>(tensor.getEncoding()) : nullptr;
  return encoding ? encoding.getValue() : llvm::StringRef();
}

RankedTensorType withLayout(Type type, llvm::StringRef layout) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  Attribute encoding = layout.empty() ? Attribute() : StringAttr::get(type.getContext(), layout);
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(), encoding);
}

bool sameUpToLayout(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size()) return false;
  for (auto [a, b] : llvm::zip(inferred, actual)) {
    auto ta = llvm::dyn_cast<RankedTensorType>(a), tb = llvm::dyn_cast<RankedTensorType>(b);
    if (ta && tb ? withLayout(ta, "") != withLayout(tb, "") : a != b) return false;
  }
  return true;
}

LogicalResult RelayoutOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (withLayout(in, "") != withLayout(out, ""))
    return emitOpError() << "must keep the shape and element type: " << in << " -> " << out;
  llvm::StringRef from = layoutOf(in), to = layoutOf(out);
  if (from == to) return emitOpError() << "converts a tensor to the layout it has (" << in << ")";
  for (llvm::StringRef layout : {from, to}) {
    std::string problem;
    try {
      problem = runtime::layoutProblem(layout.str(), in.getShape());
    } catch (const std::exception& e) {
      return emitOpError() << e.what();
    }
    if (!problem.empty()) return emitOpError() << problem << ", got " << in;
  }
  return success();
}

}  // namespace spmd::ir
