// CUDA convolution and its two backward ops through cuDNN: descriptors built and the algorithm
// chosen on the first call, then cached in the step. The heuristic's (cudnnGet*Algorithm_v7)
// deterministic algorithms are timed (cudnnFind*, as PyTorch's cudnn.benchmark) through the
// process's KernelChoices (runtime/device/KernelChoice.h), reproducibly: a search timed afresh
// picks by the clock, so two compilations of one step, or two processes of one group, could pick
// different algorithms and their bits would differ (seen on an H100: the same step compiled twice
// differed by 1e-5 relative in f32); here each (GPU model, cuDNN version, shapes) is timed once,
// the choice remembered for every replica and compilation, persisted in the kernel cache's file,
// and in a job of several processes made by process 0 for all. On an H200 timing took the
// ResNet-18 step at batch 256 from 35.4 to 23.2 ms. SPMD_CUDNN_SEARCH=0 takes the first
// deterministic algorithm the heuristic ranks, untimed; SPMD_KERNELS=conv2d:N
// (conv2d_backward_data, conv2d_backward_filter) pins an algorithm. Beside cuDNN's algorithms
// the choice times "gemm" (cuda/ConvGemm.cu: the input unfolded, one cuBLAS GEMM over the whole
// batch) where its scratch is small, for the small strided layers whose deterministic cuDNN
// algorithms are slow. f32 convolutions
// use FMA math (no TF32) unless SPMD_ALLOW_TF32=1; bf16 ones (steps the compiler kept in bf16,
// runtime/program/Bf16Kernels.h) accumulate in f32 and may use tensor cores.
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/base/Parse.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/Variants.h"
#include "runtime/mpi/Processes.h"
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/CudnnGraph.h"
#include "runtime/cuda/CudnnTypes.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cuda {
namespace {

void checkDnn(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error("cuDNN " + what + " failed: " + cudnnGetErrorString(status));
}

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  bool gemm = false;  // the GEMM variant instead of cuDNN
  // A configuration of cuDNN's graph API (cuda/CudnnGraph.h) instead of a legacy algorithm.
  std::shared_ptr<GraphConv> graph;
  std::string engine;
  size_t workspace = 0;
  ~ConvPlan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Whether `t` lies channels-last ("nhwc", SPMD_CHANNELS_LAST=1) rather than plain NCHW.
bool channelsLast(const TensorView& t) {
  if (!t.layout.empty() && t.layout != kChannelsLast)
    throw Error("cuDNN convolutions read plain and nhwc tensors, not " + std::string(t.layout));
  return t.layout == kChannelsLast;
}

cudnnTensorDescriptor_t tensor(const TensorView& t, cudnnDataType_t type) {
  cudnnTensorDescriptor_t d;
  checkDnn(cudnnCreateTensorDescriptor(&d), "tensor descriptor");
  checkDnn(cudnnSetTensor4dDescriptor(d, channelsLast(t) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, type, int(t.dim(0)), int(t.dim(1)), int(t.dim(2)),
                                      int(t.dim(3))),
           "tensor descriptor " + shapeString(Shape(t.shape.begin(), t.shape.end())));
  return d;
}

// x: NCHW input, w: OIHW filter, y: NCHW output of the forward convolution.
// `tf32`: f32 may run on tensor cores (SPMD_ALLOW_TF32=1).
std::unique_ptr<ConvPlan> plan(const KernelCall& call, const TensorView& x, const TensorView& w, const TensorView& y,
                               bool tf32) {
  auto p = std::make_unique<ConvPlan>();
  // bf16 tensors accumulate in f32 (cuDNN's pseudo-bf16 configuration), on tensor cores: their
  // products are exact in f32, so tensor cores change only the order of the f32 sums.
  const cudnnDataType_t type = cudnnDataTypeOf(x.dtype), compute = x.dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  p->x = tensor(x, type);
  p->y = tensor(y, type);
  checkDnn(cudnnCreateFilterDescriptor(&p->w), "filter descriptor");
  checkDnn(cudnnSetFilter4dDescriptor(p->w, type, CUDNN_TENSOR_NCHW, int(w.dim(0)), int(w.dim(1)), int(w.dim(2)),
                                      int(w.dim(3))),
           "filter descriptor");
  const ConvView attrs = convAttrs(call.step);
  const auto &stride = attrs.stride, &pad = attrs.padding;
  const auto& dilation = attrs.dilation;
  checkDnn(cudnnCreateConvolutionDescriptor(&p->conv), "convolution descriptor");
  checkDnn(cudnnSetConvolution2dDescriptor(p->conv, int(pad[0]), int(pad[1]), int(stride[0]), int(stride[1]),
                                           int(dilation[0]), int(dilation[1]), CUDNN_CROSS_CORRELATION, compute),
           "convolution descriptor");
  // Grouped: the filter descriptor's C is already the group's (the filter is [O, C / G, KH, KW]).
  if (attrs.groups > 1) checkDnn(cudnnSetConvolutionGroupCount(p->conv, int(attrs.groups)), "convolution groups");
  bool allow = (tf32 && type == CUDNN_DATA_FLOAT) || type == CUDNN_DATA_BFLOAT16;
  checkDnn(cudnnSetConvolutionMathType(p->conv, allow ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "math type");
  return p;
}

cudnnHandle_t handleOf(const KernelCall& call) { return static_cast<cudnnHandle_t>(deviceOf(call).cudnn()); }

// The fastest algorithm that gives the same bits on every run (cuDNN sorts by time): the
// nondeterministic ones (atomics in some backward-filter algorithms) would break the promise
// that a step's bits depend on nothing but its inputs.
// Without TF32, an f32 convolution takes no algorithm that runs on tensor cores.
bool tensorCores(cudnnMathType_t math) {
  return math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

template <typename Perf>
void choose(ConvPlan& p, const Perf* results, int found, bool fmaOnly, const KernelCall& call) {
  for (int i = 0; i < found; ++i)
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].determinism == CUDNN_DETERMINISTIC &&
        !(fmaOnly && tensorCores(results[i].mathType))) {
      p.algo = static_cast<int>(results[i].algo);
      return;
    }
  throw Error("cuDNN offers no deterministic algorithm" + std::string(fmaOnly ? " without tensor cores" : "") +
              " for '" + call.step.op + "' (" + call.step.location + "): " + std::to_string(found) +
              " ranked for its shape" + (fmaOnly ? "; SPMD_ALLOW_TF32=1 allows TF32 ones" : ""));
}

// One and zero in the scaling type cuDNN expects for the data type.
struct Scale {
  double d1 = 1, d0 = 0;
  float f1 = 1, f0 = 0;
  const void* one(DType t) const { return t == DType::f64 ? (const void*)&d1 : (const void*)&f1; }
  const void* zero(DType t) const { return t == DType::f64 ? (const void*)&d0 : (const void*)&f0; }
};

std::string shapesKey(const KernelCall& call, const TensorView& x, const TensorView& w, const TensorView& y,
                      bool fmaOnly) {
  // A forward's bias and relu are part of its cuDNN graph, whose engines differ with them.
  std::string key = std::string(dtypeName(x.dtype)) + (fmaOnly ? " fma" : "") + (channelsLast(x) ? " x nhwc" : "") +
                    (channelsLast(y) ? " y nhwc" : "") + (call.step.op == "conv2d" && call.in.size() > 2 ? " bias" : "") +
                    (convAttrs(call.step).relu ? " relu" : "");
  for (const TensorView* t : {&x, &w, &y}) key += " " + shapeString(Shape(t->shape.begin(), t->shape.end()));
  for (const char* attr : {"stride", "padding"}) {
    key += std::string(" ") + attr;
    for (int64_t v : call.step.ints(attr)) key += " " + std::to_string(v);
  }
  const ConvView attrs = convAttrs(call.step);
  if (!attrs.plain())
    key += " dilation " + std::to_string(attrs.dilation[0]) + " " + std::to_string(attrs.dilation[1]) + " groups " +
           std::to_string(attrs.groups);
  return key;
}

// "NVIDIA H100 80GB HBM3 (sm_90)": what a timed choice is valid for.
std::string deviceKind(const KernelCall& call) {
  cudaDeviceProp props;
  check(cudaGetDeviceProperties(&props, deviceOf(call).index()), "device query");
  return std::string(props.name) + " (" + deviceOf(call).arch() + ")";
}

// The variant name of the GEMM convolution (cuda/ConvGemm.cu), beside cuDNN's algorithm numbers.
constexpr const char* kGemm = "gemm";

// What the variants' speed and bits depend on besides the GPU: "cuDNN 91000, cuBLAS 130000".
std::string libraries() {
  int blas = 0;
  cublasGetProperty(MAJOR_VERSION, &blas);
  int minor = 0, patch = 0;
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return "cuDNN " + std::to_string(cudnnGetVersion()) + (cudnnGraphEngines() ? " with graph engines" : "") +
         ", cuBLAS " + std::to_string(blas) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// The algorithms a cuDNN ranking (or search) returned that can run, once each, in its order.
template <typename Perf>
std::vector<Variant> variantsOf(const Perf* results, int found) {
  std::vector<Variant> variants;
  for (int i = 0; i < found; ++i) {
    if (results[i].status != CUDNN_STATUS_SUCCESS) continue;
    const std::string name = std::to_string(static_cast<int>(results[i].algo));
    bool seen = false;
    for (const Variant& v : variants) seen |= v.name == name;
    if (!seen)
      variants.push_back({name, results[i].determinism == CUDNN_DETERMINISTIC, tensorCores(results[i].mathType)});
  }
  return variants;
}

// Whether a variant's name is a graph configuration's ("g12.k3=1"): not a legacy algorithm's
// number nor "gemm".
bool isGraphEngine(const std::string& name) { return name.size() > 1 && name[0] == 'g' && std::isdigit(name[1]); }

// The graph API's configurations for the step (SPMD_CUDNN_GRAPH=1), its bias and relu fused where
// cuDNN builds that graph (else both added after, except in bf16, whose bias is rounded in once);
// null, said on stderr, where cuDNN builds neither, so the legacy algorithms run alone.
std::shared_ptr<GraphConv> graphConv(const KernelCall& call, const TensorView& x, const TensorView& w,
                                     const TensorView& y, const std::string& op) {
  ConvShapes s{};
  for (int d = 0; d < 4; ++d) s.x[d] = x.dim(d), s.w[d] = w.dim(d), s.y[d] = y.dim(d);
  const ConvView attrs = convAttrs(call.step);
  for (int d = 0; d < 2; ++d) s.stride[d] = attrs.stride[size_t(d)], s.padding[d] = attrs.padding[size_t(d)];
  s.xLast = channelsLast(x), s.yLast = channelsLast(y);
  const ConvRole role = op == "conv2d" ? ConvRole::Forward
                        : op == "conv2d_backward_data" ? ConvRole::BackwardData
                                                        : ConvRole::BackwardFilter;
  const bool bias = role == ConvRole::Forward && call.in.size() > 2, relu = attrs.relu;
  // Fused as far as cuDNN offers: bias and relu, the bias alone (the relu after), neither; a bf16
  // bias only fused (else it is rounded in once, before the convolution: the legacy path).
  std::string why;
  const std::pair<bool, bool> fusions[] = {{bias, relu}, {bias, false}, {false, false}};
  for (size_t i = 0; i < std::size(fusions); ++i) {
    const auto [fuseBias, fuseRelu] = fusions[i];
    if (i > 0 && fusions[i] == fusions[i - 1]) continue;
    if (bias && !fuseBias && x.dtype == DType::bf16) break;
    try {
      auto graph = std::make_shared<GraphConv>(deviceOf(call).cudnn(), role, x.dtype, s, fuseBias, fuseRelu);
      if (!graph->variants().empty()) return graph;
      why = fuseRelu ? "its heuristics offer no engine configuration that propagates NaN through a fused relu"
                     : "its heuristics offer no engine configuration";
    } catch (const Error& e) {
      why = e.what();
    }
  }
  std::fprintf(stderr, "spmd: cuDNN's graph API for '%s' (%s): %s; its legacy algorithms run instead\n", op.c_str(),
               call.step.location.c_str(), why.c_str());
  return nullptr;
}

// `name`'s time (leastOfThreeRuns), or NaN, said on
// stderr, when its plan does not finalize or run.
double timeGraph(KernelCall& call, GraphConv& graph, const std::string& name, const TensorView& x, const TensorView& w,
                 const TensorView& y) {
  try {
    const size_t bytes = graph.prepare(name);
    void* workspace = bytes ? deviceOf(call).workspace(bytes) : nullptr;
    const void* bias = graph.fusesBias() ? call.in[2].data : nullptr;
    return leastOfThreeRuns(call, [&] { graph.run(name, x.data, w.data, y.data, bias, workspace); });
  } catch (const Error& e) {
    std::fprintf(stderr, "spmd: cuDNN graph configuration %s for '%s' (%s) does not run: %s\n", name.c_str(),
                 call.step.op.c_str(), call.step.location.c_str(), e.what());
    return std::nan("");
  }
}

// The step's plan, made on its first call: descriptors for (x, w, y), the process's
// KernelChoices' choice among the deterministic algorithms `rank` (a cudnnGet*Algorithm_v7 call
// filling Perf results) lists, or with SPMD_CUDNN_SEARCH=0 and no pin for `op` the first of them
// (timed by `search`, a cudnnFind* call), and its workspace (`size`, a cudnnGet*WorkspaceSize call).
template <typename Perf, typename Rank, typename Search, typename Size>
ConvPlan& cachedPlan(KernelCall& call, const TensorView& x, const TensorView& w, const TensorView& y,
                     const char* op, const char* what, Rank rank, Search search, Size size) {
  if (!call.cache) {
    const bool tf32 = envSwitch("SPMD_ALLOW_TF32").value_or(false), fmaOnly = x.dtype == DType::f32 && !tf32;
    std::shared_ptr<ConvPlan> p = plan(call, x, w, y, tf32);
    Perf results[16];
    int found = 0;
    checkDnn(rank(handleOf(call), *p, results, &found), what);
    KernelChoices& choices = KernelChoices::process();
    std::string why;
    size_t gemmBytes = 0;
    const bool gemmRuns = convGemmRuns(call, &gemmBytes);
    if (cudnnSearch() || choices.pinned(op)) {
      const ChoiceKey key{deviceKind(call), libraries(), op, shapesKey(call, x, w, y, fmaOnly)};
      std::vector<Variant> candidates = variantsOf(results, found);
      std::vector<std::string> known = {kGemm};
      for (const Variant& v : candidates) known.push_back(v.name);
      if (gemmRuns) candidates.push_back({kGemm, true, x.dtype == DType::bf16 || (x.dtype == DType::f32 && tf32)});
      // Our graphs describe plain convolutions: a dilated or grouped one takes the legacy algorithms.
      std::shared_ptr<GraphConv> graph =
          cudnnGraphEngines() && convAttrs(call.step).plain() ? graphConv(call, x, w, y, op) : nullptr;
      if (graph)
        for (const Variant& v : graph->variants()) candidates.push_back(v), known.push_back(v.name);
      auto time = [&](const std::vector<Variant>& allowed) {
        std::vector<double> seconds(allowed.size(), std::nan(""));
        Perf timed[16];
        int count = 0;
        if (std::any_of(allowed.begin(), allowed.end(),
                        [](const Variant& v) { return v.name != kGemm && !isGraphEngine(v.name); }))
          checkDnn(search(handleOf(call), *p, timed, &count), what);
        for (size_t i = 0; i < allowed.size(); ++i) {
          if (allowed[i].name == kGemm) seconds[i] = timeConvGemm(call);
          if (graph && isGraphEngine(allowed[i].name)) seconds[i] = timeGraph(call, *graph, allowed[i].name, x, w, y);
          for (int j = 0; j < count; ++j)
            if (timed[j].status == CUDNN_STATUS_SUCCESS && std::to_string(static_cast<int>(timed[j].algo)) == allowed[i].name &&
                !(seconds[i] <= double(timed[j].time) * 1e-3))
              seconds[i] = double(timed[j].time) * 1e-3;
        }
        return seconds;
      };
      // Process 0 chooses for a program whose replicas span the job's processes.
      std::unique_ptr<ChoiceExchange> exchange = call.comm && processes().size > 1 ? exchangeOf(processJob()) : nullptr;
      const Choice choice = choices.choose(key, candidates, fmaOnly, time, exchange.get(), known);
      if (isGraphEngine(choice.variant)) {
        if (!graph) throw Error("'" + std::string(op) + "' (" + call.step.location + ") is to run cuDNN graph "
                                "configuration " + choice.variant + ", but cuDNN's graph API built none here");
        p->graph = graph, p->engine = choice.variant;
      } else {
        p->gemm = choice.variant == kGemm;
        if (!p->gemm) p->algo = std::stoi(choice.variant);
      }
      why = choice.why;
    } else {
      choose(*p, results, found, fmaOnly, call);
      why = "cuDNN's heuristic";
    }
    if (p->gemm)
      p->workspace = gemmBytes;
    else if (p->graph)
      p->workspace = p->graph->prepare(p->engine);
    else
      checkDnn(size(handleOf(call), *p, &p->workspace), std::string(what) + " workspace");
    const std::string variant = p->gemm ? std::string(kGemm) : p->graph ? p->engine : std::to_string(p->algo);
    if (envSwitch("SPMD_LOG_COMPILES").value_or(false))
      std::fprintf(stderr, "spmd: cuDNN %s for '%s' (%s), x %s, w %s: %s%s (%s), workspace %zu bytes\n", what,
                   call.step.op.c_str(), call.step.location.c_str(), shapeString(Shape(x.shape.begin(), x.shape.end())).c_str(),
                   shapeString(Shape(w.shape.begin(), w.shape.end())).c_str(),
                   p->gemm ? "" : p->graph ? "graph configuration " : "algorithm ",
                   variant.c_str(), why.c_str(), p->workspace);
    if (call.variant && call.variant->empty()) *call.variant = variant + ": " + why;
    call.cache = p;
  }
  return *static_cast<ConvPlan*>(call.cache.get());
}

void* workspaceFor(const KernelCall& call, const ConvPlan& p) {
  return p.workspace ? deviceOf(call).workspace(p.workspace) : nullptr;
}

// A conv2d's relu (spmd-fuse-relu's form) where cuDNN did not fuse it: our kernel, with the relu
// op's NaN rules, in place.
void reluAfter(KernelCall& call, const TensorView& y) {
  reluInPlace(call, y);
  deviceOf(call).markKernel("relu after the convolution");
}

// The chosen graph configuration on the step's tensors (x, w, y as the forward convolution names them).
void runGraph(const KernelCall& call, const ConvPlan& p, const TensorView& x, const TensorView& w, const TensorView& y) {
  p.graph->run(p.engine, x.data, w.data, y.data, p.graph->fusesBias() ? call.in[2].data : nullptr, workspaceFor(call, p));
  deviceOf(call).markKernel("cuDNN graph configuration " + p.engine);
}

}  // namespace

// inputs: x, w, optional bias; output: y
void conv2d(KernelCall& call) {
  if (emptySums(call)) return;  // cuDNN refuses zero extents
  const TensorView &x = call.in[0], &w = call.in[1], &y = call.out[0];
  ConvPlan& p = cachedPlan<cudnnConvolutionFwdAlgoPerf_t>(
      call, x, w, y, "conv2d", "forward algorithm choice",
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnFindConvolutionForwardAlgorithm(h, p.x, p.w, p.conv, p.y, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), bytes);
      });
  if (p.gemm) return convGemm(call);
  // A bf16 result is rounded once: the bias written first, the convolution added to it (beta = 1).
  const bool biasFirst = call.in.size() > 2 && x.dtype == DType::bf16 && !p.graph;
  if (call.in.size() > 2 && !biasFirst && !p.bias) {
    checkDnn(cudnnCreateTensorDescriptor(&p.bias), "bias descriptor");
    checkDnn(cudnnSetTensor4dDescriptor(p.bias, channelsLast(y) ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                        cudnnDataTypeOf(x.dtype), 1, int(y.dim(1)), 1, 1),
             "bias descriptor");
  }
  if (biasFirst) writeChannelBias(call, call.in[2], y);
  cudnnHandle_t h = handleOf(call);
  Scale s;
  const bool relu = convAttrs(call.step).relu;
  if (p.graph) {
    runGraph(call, p, x, w, y);
    if (p.bias && !p.graph->fusesBias()) {
      checkDnn(cudnnAddTensor(h, s.one(x.dtype), p.bias, call.in[2].data, s.one(x.dtype), p.y, y.data), "bias add");
      deviceOf(call).markKernel("cuDNN bias add");
    }
    if (relu && !p.graph->fusesRelu()) reluAfter(call, y);
    return;
  }
  checkDnn(cudnnConvolutionForward(h, s.one(x.dtype), p.x, x.data, p.w, w.data, p.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), workspaceFor(call, p),
                                   p.workspace, biasFirst ? s.one(x.dtype) : s.zero(x.dtype), p.y, y.data),
           "convolution forward (" + call.step.location + ")");
  deviceOf(call).markKernel("cuDNN forward, algorithm " + std::to_string(p.algo));
  if (p.bias) {
    checkDnn(cudnnAddTensor(h, s.one(x.dtype), p.bias, call.in[2].data, s.one(x.dtype), p.y, y.data), "bias add");
    deviceOf(call).markKernel("cuDNN bias add");
  }
  if (relu) reluAfter(call, y);
}

// inputs: result_grad (y), filter; output: input_grad (x)
void conv2d_backward_data(KernelCall& call) {
  if (emptySums(call)) return;  // cuDNN refuses zero extents
  const TensorView &dy = call.in[0], &w = call.in[1], &dx = call.out[0];
  ConvPlan& p = cachedPlan<cudnnConvolutionBwdDataAlgoPerf_t>(
      call, dx, w, dy, "conv2d_backward_data", "backward-data algorithm choice",
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnFindConvolutionBackwardDataAlgorithm(h, p.w, p.y, p.conv, p.x, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, p.conv, p.x,
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), bytes);
      });
  if (p.gemm) return convGemm(call);
  if (p.graph) return runGraph(call, p, dx, w, dy);
  Scale s;
  checkDnn(cudnnConvolutionBackwardData(handleOf(call), s.one(dy.dtype), p.w, w.data, p.y, dy.data, p.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), workspaceFor(call, p),
                                        p.workspace, s.zero(dy.dtype), p.x, dx.data),
           "convolution backward data (" + call.step.location + ")");
  deviceOf(call).markKernel("cuDNN backward data, algorithm " + std::to_string(p.algo));
}

// inputs: input (x), result_grad (y); output: filter_grad
void conv2d_backward_filter(KernelCall& call) {
  if (emptySums(call)) return;  // cuDNN refuses zero extents
  const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
  ConvPlan& p = cachedPlan<cudnnConvolutionBwdFilterAlgoPerf_t>(
      call, x, dw, dy, "conv2d_backward_filter", "backward-filter algorithm choice",
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, auto* results, int* found) {
        return cudnnFindConvolutionBackwardFilterAlgorithm(h, p.x, p.y, p.conv, p.w, 16, found, results);
      },
      [](cudnnHandle_t h, ConvPlan& p, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, p.x, p.y, p.conv, p.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), bytes);
      });
  if (p.gemm) return convGemm(call);
  if (p.graph) return runGraph(call, p, x, dw, dy);
  Scale s;
  checkDnn(cudnnConvolutionBackwardFilter(handleOf(call), s.one(x.dtype), p.x, x.data, p.y, dy.data, p.conv,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), workspaceFor(call, p),
                                          p.workspace, s.zero(x.dtype), p.w, dw.data),
           "convolution backward filter (" + call.step.location + ")");
  deviceOf(call).markKernel("cuDNN backward filter, algorithm " + std::to_string(p.algo));
}

}  // namespace spmd::runtime::cuda
