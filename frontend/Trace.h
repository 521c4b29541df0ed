// Internal to the frontend: the Trace that spmd::jit opens while it runs the user's function.
// It owns the module being built, turns Tensor handles into mlir::Values and back, and creates
// ops with their inferred result types, throwing spmd::Error at the user's line on bad shapes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/Diagnostics.h"
#include "frontend/Tensor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

namespace spmd {
class Mesh;
}

namespace spmd::detail {

// The context of the innermost open trace (each trace has its own, with the spmd and func
// dialects loaded), so that traces on different threads share no MLIR state.
mlir::MLIRContext& context();

// "samples/resnet18/main.cpp:42" (paths inside the source tree print relative to it).
std::string where(Loc loc);

mlir::Type elementType(DType dtype);
mlir::RankedTensorType tensorType(DType dtype, const Shape& shape);

class Trace {
 public:
  explicit Trace(const std::string& name);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // The innermost open trace; throws naming `what` and the caller's line if there is none
  // (suggesting spmd::pmap for a `collective`, which needs its mapped axis).
  static Trace& current(const char* what, Loc loc, bool collective = false);

  Tensor addArgument(DType dtype, const Shape& shape);
  // Closes the function with `outputs` as its results.
  void finish(const std::vector<Tensor>& outputs, Loc loc);
  mlir::ModuleOp module() { return *module_; }
  mlir::func::FuncOp function() { return function_; }
  mlir::MLIRContext& context() { return *context_; }

  // spmd::pmap: the function is one replica of `size` over axis `name` (func attributes
  // spmd.axis_name / spmd.axis_size); mapped arguments and results carry spmd.mapped.
  // `microBatches` > 1: gradient accumulation, each device running that many of the `size`
  // replicas in turn (spmd.micro_batches).
  void bindAxis(const std::string& name, int64_t size, int64_t microBatches = 1);
  void markArgumentMapped(unsigned index);
  // Argument / result `index` lies on the bound mesh by `spec` (spmd.mesh_spec).
  void markArgumentOnMesh(unsigned index, const std::vector<std::string>& spec);
  void markResultOnMesh(unsigned index, const std::vector<std::string>& spec);
  // The caller donates the argument (spmd.donated): lowering pairs it with an output that takes
  // its buffers (runtime::Program::outputDonors).
  void markArgumentDonated(unsigned index);
  void describeResult(unsigned index, bool mapped, const std::string& name);
  // Throws at the caller's line unless `axis` is the bound axis; returns its size.
  int64_t checkAxis(const std::string& axis, const char* what, Loc loc) const;
  const std::string& axisName() const { return axisName_; }
  // spmd::shardMap: the bound axis is this mesh's replicas, whose axis names collectives take
  // (frontend/Mesh.h); throws at `loc` unless an axis of the mesh's size is bound.
  void bindMesh(std::shared_ptr<const Mesh> mesh, Loc loc, bool sumGradients = false);
  const Mesh* mesh() const { return mesh_.get(); }
  // ShardMapOptions::sumGradients: value_and_grad sums each gradient over its copies' axes.
  bool sumsGradients() const { return sumGradients_; }
  // The innermost open trace, or null.
  static Trace* innermost();

  mlir::Value valueOf(const Tensor& tensor, Loc loc);
  Tensor wrap(mlir::Value value);
  mlir::Location location(Loc loc);
  mlir::OpBuilder& builder() { return builder_; }

  // Layer scopes ("stage2.0.conv1") prefixed to op locations, pushed by nn::Module calls.
  void pushScope(const std::string& name) { scopes_.push_back(name); }
  void popScope() { scopes_.pop_back(); }
  // spmd::checkpoint's segment numbers, counted per trace (so a retrace gives the same IR).
  int64_t nextRematSegment() { return rematSegments_++; }

  // Creates OpTy with result types from its shape rule; a failing rule throws spmd::Error.
  template <typename OpTy, typename... Args>
  mlir::Operation* create(Loc loc, Args&&... args) {
    mlir::Location where = location(loc);
    mlir::OperationState state(where, OpTy::getOperationName());
    OpTy::build(builder_, state, mlir::TypeRange{}, std::forward<Args>(args)...);
    llvm::SmallVector<mlir::Type> types;
    mlir::MLIRContext* ctx = context_.get();
    {
      DiagnosticCollector diagnostics(ctx);
      if (mlir::failed(OpTy::inferReturnTypes(ctx, where, state.operands,
                                              state.attributes.getDictionary(ctx),
                                              state.getRawProperties(), state.regions, types)))
        diagnostics.fail("");
    }
    state.addTypes(types);
    mlir::Operation* op = builder_.create(state);
    if (op->getNumRegions() == 0) verifyRecorded(op);  // one with regions: filled later, verified with the module
    return op;
  }

  // Creates OpTy with an explicit result type (ops whose result shape is an attribute of the
  // call: broadcast, reshape) and verifies it at once.
  template <typename OpTy, typename... Args>
  mlir::Operation* createWithType(Loc loc, mlir::Type type, Args&&... args) {
    mlir::Operation* op = builder_.create<OpTy>(location(loc), type, std::forward<Args>(args)...);
    verifyRecorded(op);
    return op;
  }

 private:
  // Checks an op as it is recorded against its own definition (operand element types, attributes:
  // arithmetic on i32, float labels), so that the user's call is refused at their line, with how
  // to convert where a dtype is wrong, instead of by the pipeline's verifier after tracing. A
  // refused op is erased. Collectives are left to the module's verifier (their bound axis).
  void verifyRecorded(mlir::Operation* op);

  std::unique_ptr<mlir::MLIRContext> context_;  // first: outlives the module and the builder
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp function_;
  mlir::OpBuilder builder_;
  std::vector<std::string> scopes_;
  Trace* previous_;
  const uint64_t serial_;  // unique per trace: its tensors carry it (Tensor::traceSerial)
  std::string axisName_;
  int64_t axisSize_ = 0;
  std::shared_ptr<const Mesh> mesh_;
  bool sumGradients_ = false;
  int64_t rematSegments_ = 0;
};

// RAII scope for a layer's name while it records ops.
class TraceScope {
 public:
  TraceScope(const std::string& name);
  ~TraceScope();

 private:
  Trace* trace_;
};

}  // namespace spmd::detail
