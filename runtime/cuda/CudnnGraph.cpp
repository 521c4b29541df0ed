// A convolution through cuDNN's graph (backend) API (runtime/cuda/CudnnGraph.h). Every backend
// descriptor is owned by one Handle (destroyed with it); cuDNN's status turns into spmd::Error
// naming the call.
#include "runtime/cuda/CudnnGraph.h"

#include <cudnn.h>

#include <algorithm>
#include <cstdint>

#include "runtime/base/Error.h"
#include "runtime/cuda/CudnnTypes.h"

namespace spmd::runtime::cuda {
namespace {

void checkGraph(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) throw Error("cuDNN graph API: " + what + " failed: " + cudnnGetErrorString(status));
}

// A backend descriptor, destroyed with it.
class Handle {
 public:
  explicit Handle(cudnnBackendDescriptorType_t type) { checkGraph(cudnnBackendCreateDescriptor(type, &d_), "descriptor"); }
  ~Handle() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* address() { return &d_; }

  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const T* values,
           const char* what) {
    checkGraph(cudnnBackendSetAttribute(d_, name, type, count, values), std::string("setting ") + what);
  }
  void finalize(const std::string& what) { checkGraph(cudnnBackendFinalize(d_), "finalizing " + what); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Owned = std::unique_ptr<Handle>;

// `count` new descriptors of `type` for cuDNN to fill (a GetAttribute of descriptors), and their raw handles.
std::vector<cudnnBackendDescriptor_t> blanks(cudnnBackendDescriptorType_t type, int64_t count, std::vector<Owned>& owned) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    owned.push_back(std::make_unique<Handle>(type));
    raw.push_back(owned.back()->get());
  }
  return raw;
}

// The handle attributes are marked deprecated in cuDNN 9 headers, and still what binds a graph
// and a plan to a device without device-property descriptors.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

// Data pointers the variant pack binds by these ids.
constexpr int64_t kX = 'x', kW = 'w', kY = 'y', kBias = 'b', kConvOut = 'c', kBiasOut = 'd';
// What every tensor's pointer is assumed to be aligned to (spmd's buffers: 64 bytes or more);
// run() checks it.
constexpr int64_t kAlignment = 16;

// An [N, C, H, W] tensor, packed NCHW, or NHWC where `channelsLast` (the strides say which).
Owned tensor(const int64_t (&dims)[4], int64_t id, cudnnDataType_t type, bool isVirtual = false,
             bool channelsLast = false) {
  auto t = std::make_unique<Handle>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int64_t C = dims[1], H = dims[2], W = dims[3];
  int64_t strides[4] = {C * H * W, H * W, W, 1};
  if (channelsLast) strides[0] = H * W * C, strides[1] = 1, strides[2] = W * C, strides[3] = C;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor dtype");
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dimensions");
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id, "tensor id");
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment, "tensor alignment");
  if (isVirtual) {
    const bool yes = true;
    t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor virtual");
  }
  t->finalize("a tensor");
  return t;
}

// "g12.k3=1.k7=0" and the variant's notes, read from a heuristic's engine configuration;
// `strictNan`: whether its notes promise strict NaN propagation.
Variant describe(cudnnBackendDescriptor_t config, bool* strictNan) {
  Handle engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t count = 0;
  checkGraph(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                      engine.address()),
             "reading a configuration's engine");
  int64_t index = -1;
  checkGraph(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index),
             "reading an engine's index");
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t noteCount = 0;
  checkGraph(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                      CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &noteCount, notes),
             "reading an engine's numerical notes");
  Variant v{std::string(1, 'g'), true, false};  // not "g" + ...: GCC 12 warns wrongly (-Wrestrict)
  v.name += std::to_string(index);
  *strictNan = false;
  for (int64_t i = 0; i < noteCount; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) v.deterministic = false;
    if (notes[i] == CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP) *strictNan = true;
    // Each rounds f32 somewhere (TF32 products, converted inputs, a reduced-precision sum).
    if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE || notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)
      v.tensorCores = true;
  }
  std::vector<Owned> knobs;
  std::vector<cudnnBackendDescriptor_t> raw = blanks(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS, knobs);
  int64_t knobCount = 0;
  checkGraph(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                      CUDNN_KNOB_TYPE_COUNTS, &knobCount, raw.data()),
             "reading a configuration's knobs");
  std::vector<std::pair<int64_t, int64_t>> choices;
  for (int64_t i = 0; i < knobCount && i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, n = 0;
    checkGraph(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &n, &type),
               "reading a knob's type");
    checkGraph(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &n, &value),
               "reading a knob's value");
    choices.push_back({int64_t(type), value});
  }
  std::sort(choices.begin(), choices.end());
  for (const auto& [type, value] : choices) v.name += ".k" + std::to_string(type) + "=" + std::to_string(value);
  return v;
}

}  // namespace

struct GraphConv::Descriptors {
  cudnnHandle_t handle = nullptr;
  bool bias = false, relu = false;
  std::vector<Owned> parts;  // tensors, the convolution, the operations: alive as long as the graph
  Owned graph;
  std::vector<Owned> configs;  // one per variant, in variants_' order
  struct Plan {
    Owned plan;
    size_t workspace = 0;
  };
  std::map<std::string, Plan> plans;
};

GraphConv::GraphConv(void* handle, ConvRole role, DType dtype, const ConvShapes& s, bool bias, bool relu, int most)
    : d_(std::make_unique<Descriptors>()) {
  d_->handle = static_cast<cudnnHandle_t>(handle);
  d_->bias = bias && role == ConvRole::Forward;
  d_->relu = relu && role == ConvRole::Forward;
  const cudnnDataType_t type = cudnnDataTypeOf(dtype), compute = dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  Handle* x = d_->parts.emplace_back(tensor(s.x, kX, type, false, s.xLast)).get();
  Handle* w = d_->parts.emplace_back(tensor(s.w, kW, type)).get();
  // With a fused bias or relu the convolution writes a virtual tensor in the compute type that they
  // read (one rounding, into y).
  Handle* y = d_->parts.emplace_back(tensor(s.y, kY, type, false, s.yLast)).get();
  Handle* conv = d_->parts.emplace_back(std::make_unique<Handle>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)).get();
  const int64_t spatial = 2, dilation[2] = {1, 1};
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, "spatial dimensions");
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, "compute type");
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "mode");
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, s.padding, "padding");
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, s.padding, "padding");
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation, "dilations");
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s.stride, "strides");
  conv->finalize("the convolution");

  const float alphaF = 1, betaF = 0;
  const double alphaD = 1, betaD = 0;
  const cudnnBackendAttributeType_t scaleType = compute == CUDNN_DATA_DOUBLE ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* alpha = compute == CUDNN_DATA_DOUBLE ? (const void*)&alphaD : (const void*)&alphaF;
  const void* beta = compute == CUDNN_DATA_DOUBLE ? (const void*)&betaD : (const void*)&betaF;
  std::vector<cudnnBackendDescriptor_t> ops;
  auto operation = [&](cudnnBackendDescriptorType_t kind, cudnnBackendAttributeName_t first, cudnnBackendAttributeName_t second,
                       cudnnBackendAttributeName_t third, cudnnBackendAttributeName_t convDesc,
                       cudnnBackendAttributeName_t alphaName, cudnnBackendAttributeName_t betaName, Handle& a, Handle& b,
                       Handle& c) {
    Handle* op = d_->parts.emplace_back(std::make_unique<Handle>(kind)).get();
    const cudnnBackendDescriptor_t ta = a.get(), tb = b.get(), tc = c.get(), cd = conv->get();
    op->set(first, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ta, "an operand");
    op->set(second, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tb, "an operand");
    op->set(third, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &tc, "an operand");
    op->set(convDesc, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd, "the convolution of an operation");
    checkGraph(cudnnBackendSetAttribute(op->get(), alphaName, scaleType, 1, alpha), "setting alpha");
    checkGraph(cudnnBackendSetAttribute(op->get(), betaName, scaleType, 1, beta), "setting beta");
    op->finalize("the convolution operation");
    ops.push_back(op->get());
  };
  if (role == ConvRole::Forward) {
    // conv -> [bias add] -> [relu] -> y, each step before the last into a virtual tensor.
    auto virtualY = [&](int64_t id) { return d_->parts.emplace_back(tensor(s.y, id, compute, true, s.yLast)).get(); };
    Handle* out = d_->bias || d_->relu ? virtualY(kConvOut) : y;
    operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, *x, *w, *out);
    // A pointwise operation of `mode` on `in` (and `b`, for a binary one) into `result`.
    auto pointwise = [&](cudnnPointwiseMode_t mode, Handle* in, Handle* b, Handle* result, const std::string& what) {
      Handle* desc = d_->parts.emplace_back(std::make_unique<Handle>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR)).get();
      desc->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
      desc->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute, "pointwise precision");
      desc->finalize(what);
      Handle* op = d_->parts.emplace_back(std::make_unique<Handle>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)).get();
      const cudnnBackendDescriptor_t pw = desc->get(), xd = in->get(), yd = result->get();
      op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pointwise operation");
      op->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xd, "pointwise operation input");
      if (b) {
        const cudnnBackendDescriptor_t bd = b->get();
        op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bd, "pointwise operation operand");
      }
      op->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &yd, "pointwise operation output");
      op->finalize(what + "'s operation");
      ops.push_back(op->get());
    };
    if (d_->bias) {
      const int64_t channels[4] = {1, s.y[1], 1, 1};
      Handle* b = d_->parts.emplace_back(tensor(channels, kBias, type)).get();
      Handle* sum = d_->relu ? virtualY(kBiasOut) : y;
      pointwise(CUDNN_POINTWISE_ADD, out, b, sum, "the bias add");
      out = sum;
    }
    if (d_->relu) pointwise(CUDNN_POINTWISE_RELU_FWD, out, nullptr, y, "the relu");
  } else if (role == ConvRole::BackwardData) {
    operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, *x, *w, *y);
  } else {
    operation(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, *x,
              *w, *y);
  }
  d_->graph = std::make_unique<Handle>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  d_->graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()), ops.data(),
                 "the graph's operations");
  if (d_->handle) d_->graph->set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &d_->handle, "the graph's handle");
  d_->graph->finalize("the operation graph");

  // Each heuristic mode's ranking, deterministic configurations first, each name once.
  std::vector<std::pair<Variant, Owned>> ranked;
  for (cudnnBackendHeurMode_t heuristic : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Handle heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendDescriptor_t g = d_->graph->get();
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g, "the heuristic's graph");
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heuristic, "the heuristic's mode");
    if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;  // a mode with nothing for this graph
    int64_t count = 0;
    checkGraph(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                        nullptr),
               "counting the heuristic's results");
    std::vector<Owned> configs;
    std::vector<cudnnBackendDescriptor_t> raw = blanks(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count, configs);
    int64_t got = 0;
    if (count > 0)
      checkGraph(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                          &got, raw.data()),
                 "reading the heuristic's results");
    for (int64_t i = 0; i < got && i < count; ++i) {
      Variant v;
      bool strictNan = false;
      try {
        v = describe(raw[size_t(i)], &strictNan);
      } catch (const Error&) {
        continue;  // a configuration that cannot say what it is is not offered
      }
      if (d_->relu && !strictNan) continue;  // its relu might turn a NaN into 0
      bool seen = false;
      for (const auto& [known, _] : ranked) seen = seen || known.name == v.name;
      if (!seen) ranked.emplace_back(std::move(v), std::move(configs[size_t(i)]));
    }
  }
  std::stable_partition(ranked.begin(), ranked.end(), [](const auto& r) { return r.first.deterministic; });
  for (auto& [v, config] : ranked) {
    if (int(variants_.size()) == most) break;
    variants_.push_back(v);
    d_->configs.push_back(std::move(config));
  }
}

GraphConv::~GraphConv() = default;

bool GraphConv::fusesBias() const { return d_->bias; }
bool GraphConv::fusesRelu() const { return d_->relu; }

std::string devicePropertiesJson(void* handle) {
  Handle properties(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  properties.set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "the device's handle");
  properties.finalize("the device properties");
  int64_t size = 0;
  checkGraph(cudnnBackendGetAttribute(properties.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &size,
                                      nullptr),
             "sizing the device properties' JSON");
  std::string json(size_t(std::max<int64_t>(size, 0)), '\0');
  int64_t written = 0;
  checkGraph(cudnnBackendGetAttribute(properties.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, size,
                                      &written, json.data()),
             "reading the device properties' JSON");
  json.resize(size_t(std::clamp<int64_t>(written, 0, size)));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

size_t GraphConv::prepare(const std::string& name) {
  if (auto it = d_->plans.find(name); it != d_->plans.end()) return it->second.workspace;
  size_t i = 0;
  while (i < variants_.size() && variants_[i].name != name) ++i;
  if (i == variants_.size()) throw Error("cuDNN graph API: no engine configuration '" + name + "' for this convolution");
  Descriptors::Plan p;
  p.plan = std::make_unique<Handle>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  const cudnnBackendDescriptor_t config = d_->configs[i]->get();
  p.plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config, "the plan's configuration");
  p.plan->set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &d_->handle, "the plan's handle");
  p.plan->finalize("the execution plan of " + name);
  int64_t bytes = 0, n = 0;
  checkGraph(cudnnBackendGetAttribute(p.plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &bytes),
             "reading the workspace size of " + name);
  p.workspace = size_t(std::max<int64_t>(bytes, 0));
  const size_t workspace = p.workspace;
  d_->plans.emplace(name, std::move(p));
  return workspace;
}

void GraphConv::run(const std::string& name, const void* x, const void* w, const void* y, const void* bias,
                    void* workspace) {
  auto it = d_->plans.find(name);
  if (it == d_->plans.end()) throw Error("cuDNN graph API: '" + name + "' was run before its plan was made");
  std::vector<const void*> pointers = {x, w, y};
  std::vector<int64_t> ids = {kX, kW, kY};
  if (d_->bias) pointers.push_back(bias), ids.push_back(kBias);
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % kAlignment)
      throw Error("cuDNN graph API: a convolution operand at " + std::to_string(reinterpret_cast<uintptr_t>(p)) +
                  " is not aligned to " + std::to_string(kAlignment) + " bytes (SPMD_CUDNN_GRAPH=0 runs the legacy path)");
  Handle pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()), pointers.data(),
           "the data pointers");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(ids.size()), ids.data(), "the data ids");
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace, "the workspace");
  pack.finalize("the variant pack");
  checkGraph(cudnnBackendExecute(d_->handle, it->second.plan->get(), pack.get()), "running " + name);
}

}  // namespace spmd::runtime::cuda
