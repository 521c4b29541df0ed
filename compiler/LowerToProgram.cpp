// lowerToProgram: func.func over `spmd` ops -> runtime::Program.
#include "compiler/LowerToProgram.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "compiler/Diagnostics.h"
#include "ir/SpmdDialect.h"
#include "runtime/base/RealText.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

namespace spmd {
namespace {

DType dtypeOf(mlir::Type element, mlir::Location loc) {
  if (element.isF32()) return DType::f32;
  if (element.isF64()) return DType::f64;
  if (element.isInteger(32)) return DType::i32;
  if (element.isBF16()) return DType::bf16;
  std::string text;
  llvm::raw_string_ostream(text) << element;
  throw Error(sourceLine(loc) + ": element type " + text + " has no runtime dtype");
}

runtime::BufferDesc describe(mlir::Value value) {
  auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
  runtime::BufferDesc desc{dtypeOf(type.getElementType(), value.getLoc()),
                           Shape(type.getShape().begin(), type.getShape().end()),
                           {}};
  desc.layout = ir::layoutOf(type).str();
  return desc;
}

template <typename T>
std::vector<std::byte> bytesOf(mlir::DenseElementsAttr dense) {
  std::vector<std::byte> bytes(dense.getNumElements() * sizeof(T));
  T* out = reinterpret_cast<T*>(bytes.data());
  for (T value : dense.getValues<T>()) *out++ = value;
  return bytes;
}

std::vector<std::byte> constantBytes(ir::ConstantOp op) {
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(op.getValue());
  if (!dense) throw Error(sourceLine(op.getLoc()) + ": spmd.constant needs a dense literal");
  mlir::Type element = dense.getElementType();
  if (element.isF32()) return bytesOf<float>(dense);
  if (element.isF64()) return bytesOf<double>(dense);
  if (element.isBF16()) {  // the bits, as the runtime stores bf16
    std::vector<std::byte> bytes;
    for (const llvm::APFloat& value : dense.getValues<llvm::APFloat>()) {
      auto bits = static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
      bytes.push_back(std::byte(bits & 0xff)), bytes.push_back(std::byte(bits >> 8));
    }
    return bytes;
  }
  return bytesOf<int32_t>(dense);
}

runtime::Attr convert(mlir::NamedAttribute named, mlir::Operation* op) {
  mlir::Attribute attr = named.getValue();
  if (auto b = llvm::dyn_cast<mlir::BoolAttr>(attr)) return b.getValue();
  if (llvm::isa<mlir::UnitAttr>(attr)) return true;  // a flag that is set (axis_index's of_device)
  if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(attr)) return i.getInt();
  if (auto f = llvm::dyn_cast<mlir::FloatAttr>(attr)) return f.getValueAsDouble();
  if (auto a = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(attr))
    return std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
  if (auto s = llvm::dyn_cast<mlir::StringAttr>(attr)) return s.str();
  // The Program spells a reduction by name (runtime/program/Catalog.h: the same spelling).
  if (auto r = llvm::dyn_cast<ir::ReductionAttr>(attr)) return ir::stringifyReduction(r.getValue()).str();
  throw Error(sourceLine(op->getLoc()) + ": cannot lower attribute '" + named.getName().str() +
              "' of " + op->getName().getStringRef().str());
}

// A spmd.fused body as runtime/FusedBody text: "%0 = load 0; %1 = load 1 dims [1]; ...". A
// rounding to bf16 is `round_bf16` (the value rounded, kept in the body's f32); a widening of a
// bf16 value is that value itself (exact), so it has no instruction; a bf16 input is widened as
// it is loaded and a bf16 result rounded as it is stored (runtime/program/FusedBody.h).
std::string fusedBodyText(ir::FusedOp fused) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::DenseMap<mlir::Value, int> ids;
  int next = 0;
  auto name = [&](mlir::Value v) -> int {
    if (auto found = ids.find(v); found != ids.end()) return found->second;
    int id = next++;  // a block argument read directly: load it once
    os << "%" << id << " = load " << llvm::cast<mlir::BlockArgument>(v).getArgNumber() << "; ";
    return ids[v] = id;
  };
  for (mlir::Operation& op : fused.getBody().front()) {
    if (auto yield = llvm::dyn_cast<ir::YieldOp>(op)) {
      llvm::SmallVector<int> results;
      for (mlir::Value v : yield.getValues()) results.push_back(name(v));
      os << "yield";
      for (int r : results) os << " %" << r;
      break;
    }
    const bool rounding = ir::isBf16Rounding(&op);
    if (rounding && mlir::getElementTypeOrSelf(op.getResult(0).getType()).isF32()) {
      ids[op.getResult(0)] = name(op.getOperand(0));  // a widening: the bf16 value, exactly
      continue;
    }
    llvm::SmallVector<int> operands;
    auto broadcast = llvm::dyn_cast<ir::BroadcastInDimOp>(op);
    if (!broadcast)
      for (mlir::Value v : op.getOperands()) operands.push_back(name(v));
    int id = next++;
    ids[op.getResult(0)] = id;
    os << "%" << id << " = ";
    if (broadcast) {
      os << "load " << llvm::cast<mlir::BlockArgument>(broadcast.getInput()).getArgNumber() << " dims [";
      llvm::interleaveComma(broadcast.getDims(), os);
      os << "]";
    } else if (auto constant = llvm::dyn_cast<ir::ConstantOp>(op)) {
      auto dense = llvm::cast<mlir::DenseElementsAttr>(constant.getValue());
      os << "const " << runtime::formatReal(dense.getSplatValue<llvm::APFloat>().convertToDouble());
    } else {
      os << (rounding ? std::string_view("round_bf16") : std::string_view(op.getName().stripDialect()));
      for (int operand : operands) os << " %" << operand;
    }
    os << "; ";
  }
  return text;
}

// The mesh a shardMap-ped function runs over (spmd.mesh_axes, spmd.mesh_shape); empty without.
runtime::MeshShape meshOf(mlir::func::FuncOp function) {
  runtime::MeshShape mesh;
  auto names = function->getAttrOfType<mlir::ArrayAttr>(ir::kMeshAxesAttr);
  auto sizes = function->getAttrOfType<mlir::DenseI64ArrayAttr>(ir::kMeshShapeAttr);
  if (!names || !sizes) return mesh;
  for (mlir::Attribute name : names) mesh.names.push_back(llvm::cast<mlir::StringAttr>(name).str());
  mesh.sizes.assign(sizes.asArrayRef().begin(), sizes.asArrayRef().end());
  return mesh;
}

// What argument or result `index` is to the caller (spmd.mesh_spec, spmd.mapped, spmd.shard_of).
runtime::Placement placementOf(mlir::func::FuncOp function, unsigned index, bool result) {
  auto attr = [&](const char* name) {
    return result ? function.getResultAttr(index, name) : function.getArgAttr(index, name);
  };
  runtime::Placement placement;
  if (auto spec = llvm::dyn_cast_or_null<mlir::ArrayAttr>(attr(ir::kMeshSpecAttr))) {
    placement.kind = runtime::Placement::Kind::Mesh;
    for (mlir::Attribute axis : spec) placement.spec.push_back(llvm::cast<mlir::StringAttr>(axis).str());
  } else if (auto full = llvm::dyn_cast_or_null<mlir::TypeAttr>(attr(ir::kShardOfAttr))) {
    auto shape = llvm::cast<mlir::RankedTensorType>(full.getValue()).getShape();
    placement.kind = runtime::Placement::Kind::Sliced;
    placement.full.assign(shape.begin(), shape.end());
  } else if (attr(ir::kMappedAttr)) {
    placement.kind = runtime::Placement::Kind::Mapped;
  }
  return placement;
}

// Donation's pairs (Program::outputDonors): each donated argument, in order, gives its buffers to
// the first output not yet taken with its dtype, shape and placement, except outputs that pass an
// argument through unchanged (their copy must read the inputs before any is overwritten).
std::vector<int> donorsOf(mlir::func::FuncOp function, const runtime::Program& program) {
  std::vector<int> donors(program.outputs.size(), -1);
  for (unsigned i = 0; i < program.inputs.size(); ++i) {
    if (!function.getArgAttr(i, ir::kDonatedAttr)) continue;
    const runtime::BufferDesc& from = program.buffers[program.inputs[i]];
    for (size_t k = 0; k < program.outputs.size(); ++k) {
      const runtime::BufferDesc& to = program.buffers[program.outputs[k]];
      bool passthrough = std::count(program.inputs.begin(), program.inputs.end(), program.outputs[k]) > 0;
      if (donors[k] >= 0 || passthrough || to.dtype != from.dtype || to.shape != from.shape ||
          program.outputPlacements[k] != program.inputPlacements[i])
        continue;
      donors[k] = int(i);
      break;
    }
  }
  return donors;
}

}  // namespace

runtime::Program lowerToProgram(mlir::func::FuncOp function) {
  runtime::Program program;
  program.name = function.getSymName().str();
  if (auto axis = function->getAttrOfType<mlir::StringAttr>(ir::kAxisNameAttr)) {
    program.axisName = axis.str();
    if (auto size = function->getAttrOfType<mlir::IntegerAttr>(ir::kAxisSizeAttr))
      program.replicas = size.getInt();
    if (auto micro = function->getAttrOfType<mlir::IntegerAttr>(ir::kMicroBatchesAttr))
      program.microBatches = micro.getInt();
  }
  llvm::DenseMap<mlir::Value, int> ids;
  auto define = [&](mlir::Value value, runtime::BufferDesc desc) {
    ids[value] = static_cast<int>(program.buffers.size());
    program.buffers.push_back(std::move(desc));
    return ids[value];
  };
  for (mlir::BlockArgument arg : function.getArguments())
    program.inputs.push_back(define(arg, describe(arg)));

  for (mlir::Operation& op : function.getBody().front()) {
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (mlir::Value value : ret.getOperands()) program.outputs.push_back(ids.at(value));
      continue;
    }
    if (auto constant = llvm::dyn_cast<ir::ConstantOp>(op)) {
      runtime::BufferDesc desc = describe(constant.getResult());
      desc.constant = constantBytes(constant);
      define(constant.getResult(), std::move(desc));
      continue;
    }
    if (!llvm::isa<ir::SpmdDialect>(op.getDialect()))
      throw Error(sourceLine(op.getLoc()) + ": cannot lower " + op.getName().getStringRef().str() +
                  " to a runtime step; only spmd ops lower");
    runtime::Step step;
    step.op = op.getName().stripDialect().str();
    step.location = sourceLine(op.getLoc());
    step.layer = layerPath(op.getLoc());
    for (mlir::Value operand : op.getOperands()) step.inputs.push_back(ids.at(operand));
    for (mlir::Value result : op.getResults()) step.outputs.push_back(define(result, describe(result)));
    if (auto fused = llvm::dyn_cast<ir::FusedOp>(op)) step.attrs["body"] = fusedBodyText(fused);
    for (mlir::NamedAttribute named : op.getAttrDictionary())
      if (!named.getName().strref().starts_with(ir::kAttrPrefix))  // analysis marks, not kernel inputs
        step.attrs[named.getName().str()] = convert(named, &op);
    program.steps.push_back(std::move(step));
  }
  program.mesh = meshOf(function);
  for (unsigned i = 0; i < program.inputs.size(); ++i) program.inputPlacements.push_back(placementOf(function, i, false));
  for (unsigned k = 0; k < program.outputs.size(); ++k) program.outputPlacements.push_back(placementOf(function, k, true));
  program.outputDonors = donorsOf(function, program);
  return program;
}

}  // namespace spmd
