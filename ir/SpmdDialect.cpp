// Registers the `spmd` dialect's ops and emits the generated op definitions.
// Shape rules, verifiers and folders are in SpmdShapeRules.cpp.
#include "ir/SpmdDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;

#include "ir/SpmdDialect.cpp.inc"
#include "ir/SpmdEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/SpmdAttrs.cpp.inc"
#include "ir/SpmdInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "ir/SpmdOps.cpp.inc"

namespace spmd::ir {

void SpmdDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/SpmdOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/SpmdAttrs.cpp.inc"
      >();
}

Operation* SpmdDialect::materializeConstant(OpBuilder& builder, Attribute value, Type type,
                                            Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type) return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

namespace {
template <typename... Ops>
std::vector<std::string> namesOf() {
  return {Ops::getOperationName().drop_front(SpmdDialect::getDialectNamespace().size() + 1).str()...};
}
}  // namespace

std::vector<std::string> opNames() {
  return namesOf<
#define GET_OP_LIST
#include "ir/SpmdOps.cpp.inc"
      >();
}

namespace {
template <typename Info>
Differentiation classify(const Info& info) {
  if (info.template hasInterface<VjpOpInterface>()) return Differentiation::Vjp;
  if (info.template hasTrait<ZeroGradient>()) return Differentiation::ZeroGradient;
  if (info.template hasTrait<FirstOrderOnly>()) return Differentiation::FirstOrderOnly;
  return Differentiation::None;
}
}  // namespace

Differentiation differentiation(Operation* op) {
  if (auto registered = op->getRegisteredInfo()) return classify(*registered);
  return Differentiation::None;
}

Differentiation differentiation(const std::string& opName) {
  static MLIRContext* context = [] {
    auto* ctx = new MLIRContext();
    ctx->loadDialect<SpmdDialect>();
    return ctx;
  }();
  auto info = RegisteredOperationName::lookup("spmd." + opName, context);
  return info ? classify(*info) : Differentiation::None;
}

}  // namespace spmd::ir
