// spmd::registerCustomOp and customCall (frontend/CustomOp.h): the frontend's registry (shape
// rules, VJPs), the runtime's (kernels, runtime/device/CustomKernels.h), and the traced call.
#include "frontend/CustomOp.h"

#include <map>
#include <memory>
#include <mutex>

#include "frontend/CustomVjp.h"
#include "frontend/Trace.h"
#include "ir/SpmdDialect.h"
#include "runtime/device/CustomKernels.h"

namespace spmd {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const CustomOp>> ops;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::shared_ptr<const CustomOp> opNamed(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second;
}

bool validName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != ':' && c != '-') return false;
  return true;
}

std::string typeText(const TensorType& t) { return std::string(dtypeName(t.dtype)) + shapeString(t.shape); }

// The outputs' types by the op's shape rule, checked.
std::vector<TensorType> outputTypes(const CustomOp& op, const std::vector<Tensor>& inputs,
                                    const CustomAttributes& attributes, const std::string& at) {
  std::vector<TensorType> in;
  for (const Tensor& t : inputs) in.push_back({t.dtype(), t.shape()});
  std::vector<TensorType> out;
  try {
    out = op.shape(in, attributes);
  } catch (const std::exception& e) {
    throw Error(at + "its shape rule refused the inputs: " + e.what());
  }
  if (out.empty()) throw Error(at + "its shape rule gave no outputs; a custom op has at least one");
  for (size_t k = 0; k < out.size(); ++k)
    for (int64_t d : out[k].shape)
      if (d < 0) throw Error(at + "its shape rule gave output " + std::to_string(k) + " the shape " + typeText(out[k]));
  return out;
}

}  // namespace

void registerCustomOp(CustomOp op, Loc loc) {
  const std::string at = detail::where(loc) + ": spmd::registerCustomOp '" + op.name + "': ";
  if (!validName(op.name))
    throw Error(at + "a custom op's name is letters, digits and \"_.:-\" (e.g. \"mylib.softsign\")");
  if (!op.shape) throw Error(at + "it has no shape rule (CustomOp::shape)");
  if (!op.cpu) throw Error(at + "it has no host kernel (CustomOp::cpu)");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.ops.count(op.name)) throw Error(at + "it is registered already; register each op once per process");
  const std::string name = op.name;
  runtime::registerCustomKernel(name, op.cpu, op.cuda);
  r.ops.emplace(name, std::make_shared<const CustomOp>(std::move(op)));
}

bool customOpRegistered(const std::string& name) { return opNamed(name) != nullptr; }

std::vector<Tensor> customCall(const std::string& name, const std::vector<Tensor>& inputs,
                               const CustomAttributes& attributes, Loc loc) {
  const std::string at = detail::where(loc) + ": spmd::customCall '" + name + "': ";
  const std::shared_ptr<const CustomOp> op = opNamed(name);
  if (!op) {
    std::string known;
    for (const std::string& n : runtime::customKernelNames()) known += (known.empty() ? "" : ", ") + n;
    throw Error(at + "no custom op of that name is registered (registered: " + (known.empty() ? "none" : known) +
                "); call spmd::registerCustomOp first");
  }
  detail::Trace& trace = detail::Trace::current("customCall", loc);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw Error(at + "input " + std::to_string(i) + " is an undefined tensor");
  const std::vector<TensorType> types = outputTypes(*op, inputs, attributes, at);
  std::string configText;
  try {
    configText = runtime::encodeCustomAttributes(attributes);
    if (op->cuda.defined()) runtime::customCudaAttributeValues(name, op->cuda, attributes);  // its CUDA kernel's numbers
  } catch (const Error& e) {
    throw Error(at + e.what());
  }
  // The op itself on `operands` (the inputs, or inside a custom_vjp its forward's arguments).
  auto emit = [&](const std::vector<Tensor>& operands) {
    llvm::SmallVector<mlir::Value> values;
    for (const Tensor& t : operands) values.push_back(trace.valueOf(t, loc));
    llvm::SmallVector<mlir::Type> resultTypes;
    for (const TensorType& t : types) resultTypes.push_back(detail::tensorType(t.dtype, t.shape));
    auto call = trace.builder().create<ir::CustomCallOp>(trace.location(loc), resultTypes, values, name, configText);
    std::vector<Tensor> results;
    for (mlir::Value result : call.getResults()) results.push_back(trace.wrap(result));
    return results;
  };
  if (!op->vjp) return emit(inputs);

  // With a VJP: a custom_vjp over the float inputs (integer ones, which have no cotangents, are
  // read from outside it), whose backward is the registration's VJP.
  for (size_t k = 0; k < types.size(); ++k)
    if (types[k].dtype == DType::i32)
      throw Error(at + "output " + std::to_string(k) + " is " + typeText(types[k]) +
                  " (integer), but an op with a VJP has float outputs; register the integer part as an op of its own");
  std::vector<size_t> floats;
  std::vector<Tensor> floatInputs;
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype() != DType::i32) {
      floats.push_back(i), floatInputs.push_back(inputs[i]);
      names.push_back("input " + std::to_string(i));
    }
  auto withFloats = [&](const std::vector<Tensor>& leaves) {
    std::vector<Tensor> all = inputs;
    for (size_t j = 0; j < floats.size(); ++j) all[floats[j]] = leaves[j];
    return all;
  };
  size_t outputs = types.size();
  auto forward = [&](const std::vector<Tensor>& leaves) {
    std::vector<Tensor> results = emit(withFloats(leaves));
    std::vector<Tensor> out = results;  // the outputs, then the residuals: the float inputs and the outputs
    out.insert(out.end(), leaves.begin(), leaves.end());
    out.insert(out.end(), results.begin(), results.end());
    return out;
  };
  auto backward = [&](const std::vector<Tensor>& leaves) {
    const size_t k = floats.size(), m = types.size();
    std::vector<Tensor> primal(leaves.begin(), leaves.begin() + std::ptrdiff_t(k));
    std::vector<Tensor> results(leaves.begin() + std::ptrdiff_t(k), leaves.begin() + std::ptrdiff_t(k + m));
    std::vector<Tensor> cotangents(leaves.begin() + std::ptrdiff_t(k + m), leaves.end());
    std::vector<Tensor> grads = op->vjp(withFloats(primal), results, cotangents, attributes);
    if (grads.size() != inputs.size())
      throw Error(at + "its VJP returned " + std::to_string(grads.size()) + " cotangent(s) for " +
                  std::to_string(inputs.size()) + " input(s); return one per input (a default Tensor for zeros)");
    std::vector<Tensor> floatGrads;
    for (size_t j : floats) floatGrads.push_back(grads[j]);
    return floatGrads;
  };
  if (floatInputs.empty()) return emit(inputs);  // nothing to differentiate
  return detail::customVjpLeaves(floatInputs, names, forward, outputs, backward, loc);
}

}  // namespace spmd
