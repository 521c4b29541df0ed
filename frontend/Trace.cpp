// Trace: the module under construction, Tensor <-> mlir::Value, locations and scopes.
#include "frontend/Trace.h"

#include <atomic>

#include "compiler/Registration.h"
#include "frontend/Mesh.h"
#include "ir/SpmdDialect.h"
#include "mlir/IR/DialectRegistry.h"

namespace spmd::detail {
namespace {

thread_local Trace* currentTrace = nullptr;

DType dtypeOf(mlir::Type element) {
  if (element.isF32()) return DType::f32;
  if (element.isF64()) return DType::f64;
  if (element.isInteger(32)) return DType::i32;
  if (element.isBF16()) return DType::bf16;
  throw Error("internal: traced value has an element type with no runtime dtype");
}

// Paths inside the source tree print relative to it.
std::string shortPath(const char* file) {
  std::string path = file;
#ifdef SPMD_SOURCE_DIR
  std::string root = SPMD_SOURCE_DIR "/";
  if (path.rfind(root, 0) == 0) return path.substr(root.size());
#endif
  return path;
}

}  // namespace

std::string where(Loc loc) { return shortPath(loc.file_name()) + ":" + std::to_string(loc.line()); }

namespace {
// A context of its own for each trace: MLIR contexts are not safe to share between threads
// without their locks, and a context's diagnostic handlers would see every thread's messages.
// Single-threaded (no thread pool of MLIR's own beside the replicas' threads).
std::unique_ptr<mlir::MLIRContext> newContext() {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  // A user's error leads with their line and says what is wrong; MLIR's note repeating the op in
  // generic form ("see current operation: %1 = ...") is for the IR dumps (SPMD_DUMP_IR).
  ctx->printOpOnDiagnostic(false);
  return ctx;
}
}  // namespace

mlir::MLIRContext& context() {
  if (!currentTrace) throw Error("internal: an MLIR type was asked for outside a trace");
  return currentTrace->context();
}

mlir::Type elementType(DType dtype) {
  mlir::MLIRContext* ctx = &context();
  switch (dtype) {
    case DType::f32: return mlir::Float32Type::get(ctx);
    case DType::f64: return mlir::Float64Type::get(ctx);
    case DType::i32: return mlir::IntegerType::get(ctx, 32);
    case DType::bf16: return mlir::BFloat16Type::get(ctx);
  }
  return {};
}

mlir::RankedTensorType tensorType(DType dtype, const Shape& shape) {
  return mlir::RankedTensorType::get(shape, elementType(dtype));
}

namespace {
std::atomic<uint64_t> traceSerials{0};
}  // namespace

Trace::Trace(const std::string& name)
    : context_(newContext()), builder_(context_.get()), previous_(currentTrace), serial_(++traceSerials) {
  mlir::Location loc = mlir::NameLoc::get(builder_.getStringAttr(name));
  module_ = mlir::ModuleOp::create(loc);
  builder_.setInsertionPointToEnd(module_->getBody());
  function_ = builder_.create<mlir::func::FuncOp>(loc, "main", builder_.getFunctionType({}, {}));
  builder_.setInsertionPointToEnd(function_.addEntryBlock());
  currentTrace = this;
}

Trace::~Trace() { currentTrace = previous_; }

Trace& Trace::current(const char* what, Loc loc, bool collective) {
  if (!currentTrace) {
    throw Error(where(loc) + ": spmd::" + what + " was called outside a traced function; call it inside a function "
                "passed to " + (collective ? "spmd::pmap (collectives need its mapped axis)" : "spmd::jit or spmd::pmap"));
  }
  return *currentTrace;
}

Tensor Trace::addArgument(DType dtype, const Shape& shape) {
  mlir::Block& body = function_.getBody().front();
  mlir::Value arg = body.addArgument(tensorType(dtype, shape), function_.getLoc());
  function_.setFunctionType(builder_.getFunctionType(body.getArgumentTypes(), {}));
  return wrap(arg);
}

void Trace::finish(const std::vector<Tensor>& outputs, Loc loc) {
  llvm::SmallVector<mlir::Value> values;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined())
      throw Error(where(loc) + ": output " + std::to_string(i) + " of the traced function is an undefined "
                  "(default-constructed) tensor; return a computed one");
    values.push_back(valueOf(outputs[i], loc));
  }
  builder_.create<mlir::func::ReturnOp>(location(loc), values);
  mlir::Block& body = function_.getBody().front();
  function_.setFunctionType(
      builder_.getFunctionType(body.getArgumentTypes(), mlir::ValueRange(values).getTypes()));
}

Trace* Trace::innermost() { return currentTrace; }

void Trace::bindMesh(std::shared_ptr<const Mesh> mesh, Loc loc, bool sumGradients) {
  if (axisName_.empty() || axisSize_ != mesh->size())
    throw Error(where(loc) + ": spmd::shardMap's mesh " + mesh->describe() + " has " + std::to_string(mesh->size()) +
                " replicas but the mapped axis has " + std::to_string(axisSize_));
  mesh_ = std::move(mesh);
  sumGradients_ = sumGradients;
  llvm::SmallVector<mlir::Attribute> names;
  llvm::SmallVector<int64_t> sizes;
  for (const MeshAxis& a : mesh_->axes()) names.push_back(builder_.getStringAttr(a.name)), sizes.push_back(a.size);
  function_->setAttr(ir::kMeshAxesAttr, builder_.getArrayAttr(names));
  function_->setAttr(ir::kMeshShapeAttr, builder_.getDenseI64ArrayAttr(sizes));
}

void Trace::verifyRecorded(mlir::Operation* op) {
  // A collective's verifier reads the axis its enclosing function binds, which a function traced
  // for value_and_grad gets only when it is put in place: those are verified with the module.
  if (mlir::isa<ir::AllReduceOp, ir::AllGatherOp, ir::ReduceScatterOp, ir::PpermuteOp, ir::AllToAllOp, ir::AxisIndexOp>(op))
    return;
  DiagnosticCollector diagnostics(op->getContext());
  if (mlir::succeeded(mlir::verify(op))) return;
  op->erase();
  // The diagnostic (the context prints no generic-form op with it: newContext).
  std::string text = diagnostics.text();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.find("i32>'") != std::string::npos && text.find("float") != std::string::npos)  // tensor<i32>, tensor<2xi32>
    text += "; spmd's arithmetic takes floating-point tensors: convert the i32 operand with spmd::cast(x, DType::f32) first";
  else if (text.find("integer values, but got") != std::string::npos)
    text += "; convert it with spmd::cast(x, DType::i32) first";
  throw Error(text);
}

void Trace::bindAxis(const std::string& name, int64_t size, int64_t microBatches) {
  axisName_ = name;
  axisSize_ = size;
  function_->setAttr(ir::kAxisNameAttr, builder_.getStringAttr(name));
  function_->setAttr(ir::kAxisSizeAttr, builder_.getI64IntegerAttr(size));
  if (microBatches > 1) function_->setAttr(ir::kMicroBatchesAttr, builder_.getI64IntegerAttr(microBatches));
}

void Trace::markArgumentMapped(unsigned index) {
  function_.setArgAttr(index, ir::kMappedAttr, builder_.getUnitAttr());
}

namespace {
mlir::ArrayAttr specAttr(mlir::OpBuilder& builder, const std::vector<std::string>& spec) {
  std::vector<mlir::Attribute> axes;
  for (const std::string& axis : spec) axes.push_back(builder.getStringAttr(axis));
  return builder.getArrayAttr(axes);
}
}  // namespace

void Trace::markArgumentOnMesh(unsigned index, const std::vector<std::string>& spec) {
  function_.setArgAttr(index, ir::kMeshSpecAttr, specAttr(builder_, spec));
}

void Trace::markResultOnMesh(unsigned index, const std::vector<std::string>& spec) {
  function_.setResultAttr(index, ir::kMeshSpecAttr, specAttr(builder_, spec));
}

void Trace::markArgumentDonated(unsigned index) {
  function_.setArgAttr(index, ir::kDonatedAttr, builder_.getUnitAttr());
}

void Trace::describeResult(unsigned index, bool mapped, const std::string& name) {
  if (mapped) function_.setResultAttr(index, ir::kMappedAttr, builder_.getUnitAttr());
  if (!name.empty()) function_.setResultAttr(index, ir::kNameAttr, builder_.getStringAttr(name));
}

int64_t Trace::checkAxis(const std::string& axis, const char* what, Loc loc) const {
  if (axisName_.empty())
    throw Error(where(loc) + ": spmd::" + what + " over axis '" + axis +
                "': no axis is bound here; collectives need a function mapped by spmd::pmap "
                "(spmd::jit binds none)");
  if (axis != axisName_ && mesh_) {
    std::string axes;
    for (const MeshAxis& a : mesh_->axes()) axes += "'" + a.name + "', ";
    throw Error(where(loc) + ": spmd::" + what + " over axis '" + axis + "', which is not bound; the enclosing "
                "spmd::shardMap binds the axes " + axes + "of mesh " + mesh_->describe() + " and '" + axisName_ +
                "' for the whole mesh" + (mesh_->has(axis) ? " (with groups, name the whole mesh's axis)" : ""));
  }
  if (axis != axisName_)
    throw Error(where(loc) + ": spmd::" + what + " over axis '" + axis +
                "', which is not bound; the enclosing spmd::pmap binds axis '" + axisName_ +
                "' (its axisName option)");
  return axisSize_;
}

mlir::Value Trace::valueOf(const Tensor& tensor, Loc loc) {
  if (!tensor.defined())
    throw Error(where(loc) +
                ": an undefined (default-constructed) tensor was passed to an op");
  if (tensor.trace() == this && tensor.traceSerial() == serial_) return mlir::Value::getFromOpaquePointer(tensor.value());
  if (tensor.isTraced())
    throw Error(where(loc) +
                ": tensor " + tensor.typeString() + " belongs to another trace (a traced value "
                "escaped its spmd::jit function, kept in a variable the function captured); return it from "
                "that function, or pass it in as an argument instead");
  const Array& array = tensor.array();
  auto type = tensorType(array.dtype, array.shape);
  auto attr = mlir::DenseElementsAttr::getFromRawBuffer(
      type, llvm::ArrayRef<char>(reinterpret_cast<const char*>(array.data()), array.bytes()));
  return create<ir::ConstantOp>(loc, llvm::cast<mlir::ElementsAttr>(attr))->getResult(0);
}

Tensor Trace::wrap(mlir::Value value) {
  auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
  return Tensor::traced(this, serial_, const_cast<void*>(value.getAsOpaquePointer()),
                        dtypeOf(type.getElementType()),
                        Shape(type.getShape().begin(), type.getShape().end()));
}

mlir::Location Trace::location(Loc loc) {
  mlir::Location file = mlir::FileLineColLoc::get(builder_.getStringAttr(shortPath(loc.file_name())),
                                                  loc.line(), loc.column());
  if (scopes_.empty()) return file;
  return mlir::NameLoc::get(builder_.getStringAttr(scopes_.back()), file);
}

TraceScope::TraceScope(const std::string& name) : trace_(currentTrace) {
  if (trace_) trace_->pushScope(name);
}

TraceScope::~TraceScope() {
  if (trace_) trace_->popScope();
}

}  // namespace spmd::detail
