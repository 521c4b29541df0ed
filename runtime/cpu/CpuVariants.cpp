// The CPU's variant lists (the convolutions' and matmul's) and what a timed choice among them is
// valid for.
#include "runtime/cpu/CpuVariants.h"

#include <omp.h>

#include <cstdlib>
#include <fstream>

#include "runtime/base/Error.h"
#include "runtime/cpu/DirectF64Conv.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/OwnGemm.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/cpu/SingleChannelConv.h"
#include "runtime/cpu/SlicedOnednn.h"
#include "runtime/cpu/StridedConv.h"
#include "runtime/cpu/Winograd.h"
#include "runtime/program/OpAttrs.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {
namespace {

std::string isaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "isa " + std::to_string(static_cast<unsigned>(isa));
  }
}

std::string device() {
  static const std::string kind = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    return cpuKind(cpuinfo) + ", oneDNN " + isaName(dnnl::get_effective_cpu_isa());
  }();
  return kind + ", spmd " + ownIsaName(ownIsa());
}

// The revision of our own CPU kernels' speed: part of every timed choice's key, so that a change
// that makes a variant faster or slower times its steps again instead of keeping a choice made
// against the old code (and a checkpoint's `--resume` says the choices differ: their bits may).
// Bump it with such a change. 2: the chunked Winograd's plain stores and padded planes, the
// strided GEMMs' transposed backward filter (2026-11-30). 3: Winograd F(4x4, 3x3) and its vector
// transforms, the scratch on huge pages (2026-11-30). 4: F(4x4, 3x3)'s transforms load and store
// whole vectors (2026-12-07: stage 1's 3x3 at width 16, 0.57 -> 0.40 ms a call on Zen 2), and
// F(2x2, 3x3)'s filter transforms take their taps through WinogradLanes.h's transpose. 5: matmul's
// own GEMM asks for the next tile's part of C ahead (2026-12-07: 2-6% less on the transformer's
// shapes on Zen 2).
constexpr int kOwnKernelsRevision = 5;

std::string library() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         ", spmd kernels r" + std::to_string(kOwnKernelsRevision);
}

// What else a choice depends on: the threads a variant gets (its speed and, for oneDNN's own
// threading, its bits); with thread-invariant kernels only, nothing else, so that one choice
// holds for every thread count and the bits follow (timed with the threads of the first run).
std::string setting() {
  return threadInvariantKernels() ? std::string("thread-invariant") : "threads " + std::to_string(omp_get_max_threads());
}

bool isF64(const KernelCall& call) { return call.in[0].dtype == DType::f64; }
bool notF64(const KernelCall& call) { return !isF64(call); }

// Where oneDNN's bf16 kernels run, our f32 variants are candidates for bf16 steps too, between
// roundings: on an Intel Xeon with AMX (2026-12-07) oneDNN's bf16 filter gradient of stage 4's
// 3x3 convolutions (512 channels, 4x4 pixels) took 18.8 ms against 6.4 ms for our f32 Winograd.
bool widensBf16(const KernelCall& call) { return call.in[0].dtype == DType::bf16 && onednnBf16(); }

// The switches variants replaced: refused, naming what to set instead.
void refuseOldSwitches() {
  for (const char* old : {"SPMD_WINOGRAD", "SPMD_STRIDED_GEMM"})
    if (std::getenv(old))
      throw Error(std::string(old) + " is no longer read: the CPU's convolution kernels are variants chosen by " +
                  "timing; pin them with SPMD_KERNELS (oneDNN's direct kernels everywhere: SPMD_KERNELS=conv2d:onednn," +
                  "conv2d_backward_data:onednn,conv2d_backward_filter:onednn), and unset " + old +
                  "; `spmd-run --kernels cpu` lists the variants");
}

// Never taken untimed: the list's order puts the variant before it first.
bool never(const KernelCall&) { return false; }

// Our own convolution kernels run the plain form (neither dilated nor grouped); oneDNN's and the
// reference loops run every form.
bool plain(const KernelCall& c) { return convAttrs(c.step).plain(); }
template <bool (*Runs)(const KernelCall&)>
bool plainAnd(const KernelCall& c) {
  return plain(c) && Runs(c);
}
// A dilated or grouped convolution where oneDNN does not run or is not allowed: f64, or with
// SPMD_THREAD_INVARIANT=1 (oneDNN's sums may split by thread): the reference loops.
bool referenceRuns(const KernelCall& c) { return !plain(c) && (isF64(c) || threadInvariantKernels()); }

// The reference loops read plain NCHW: blocked operands are relaid into plain copies first, and
// blocked results relaid from theirs after.
template <KernelFn Reference>
void referenceOnPlain(KernelCall& call) {
  std::vector<std::vector<std::byte>> copies;
  auto plainOf = [&](const TensorView& v) {
    TensorView plain = v;
    if (v.layout.empty()) return plain;
    copies.emplace_back(size_t(v.numel()) * dtypeSize(v.dtype));
    plain.data = copies.back().data(), plain.layout = "";
    return plain;
  };
  std::vector<TensorView> in, out;
  for (const TensorView& v : call.in) in.push_back(plainOf(v));
  for (const TensorView& v : call.out) out.push_back(plainOf(v));
  std::shared_ptr<void> none;
  auto relayout = [&](const TensorView& from, const TensorView& to) {
    if (from.data == to.data) return;
    KernelCall copy{call.step, std::span<const TensorView>(&from, 1), std::span<const TensorView>(&to, 1), none};
    reference::relayout(copy);
  };
  for (size_t i = 0; i < in.size(); ++i) relayout(call.in[i], in[i]);
  KernelCall plain{call.step, in, out, none, call.comm, call.device};
  Reference(plain);
  for (size_t i = 0; i < out.size(); ++i) relayout(out[i], call.out[i]);
}

constexpr const char* kReferenceWhy =
    "the reference loops in double (each result rounded once), for dilated or grouped convolutions in f64 or "
    "with SPMD_THREAD_INVARIANT=1 (direct_f64 runs the plain ones)";

constexpr const char* kDirectF64Why =
    "f64 (oneDNN has none): direct loops vectorized across channels and threaded, each sum in the reference "
    "loops' order (their bits)";

constexpr const char* kSlicedWhy =
    "oneDNN's direct kernel on fixed slices of the images, one thread each";

using winograd::Path;

constexpr const char* kWinograd4x4Why =
    "Winograd F(4x4,3x3), tiles in chunks through 36 one-thread oneDNN GEMMs: 2.25 multiplies an output where "
    "F(2x2,3x3) takes 4, at several times the direct kernels' rounding error (wide layers on small feature maps)";

// A Winograd path of one direction (`F`: winograd::forward, backwardData or backwardFilter) as
// a variant; neither path's bits depend on the thread count (the chunked one's GEMMs are
// sliced::Gemm's).
template <void (*F)(KernelCall&, Path), Path P>
KernelVariant winogradVariant(const char* why) {
  return {P == Path::Grouped ? "winograd_grouped" : P == Path::Chunked ? "winograd_chunked" : "winograd_4x4", why, true,
          [](const KernelCall& c) { return plain(c) && winograd::runs(c, P); },
          [](const KernelCall& c) { return winograd::pays(c, P); }, [](KernelCall& c) { F(c, P); },
          P == Path::Chunked4x4};
}

const VariantSet& forwardSet() {
  static const VariantSet set{
      "conv2d",
      "cpu",
      {winogradVariant<&winograd::forward, Path::Grouped>(
            "Winograd F(2x2,3x3), 16-64 channels, tiles a few at a time in L1 (4 multiplies an output where direct takes 9)"),
       winogradVariant<&winograd::forward, Path::Chunked>(
            "Winograd F(2x2,3x3), tiles in chunks through 16 one-thread oneDNN GEMMs (wide layers)"),
       winogradVariant<&winograd::forward, Path::Chunked4x4>(kWinograd4x4Why),
       {"strided_gemm", "stride 2 as im2col and one-thread oneDNN GEMMs on row slices (oneDNN's direct kernels are slow on few output pixels)", true,
        &plainAnd<&strided::runs>, &strided::pays, &strided::forward},
       {"onednn", "oneDNN's direct convolution, any shape, f32 and bf16", false, &notF64, nullptr, &onednnConv2d},
       {"onednn_sliced", kSlicedWhy, true, &plainAnd<&sliced::runs>, &never, &sliced::conv2d},
       {"direct_f64", kDirectF64Why, true, &plainAnd<&direct_f64::runs>, nullptr, &direct_f64::forward},
       {"reference", kReferenceWhy, true, &referenceRuns, nullptr, &referenceOnPlain<&reference::conv2d>}},
      &device, &library, &setting, &widensBf16, &widenedOnCpu};
  return set;
}

const VariantSet& backwardDataSet() {
  static const VariantSet set{
      "conv2d_backward_data",
      "cpu",
      {winogradVariant<&winograd::backwardData, Path::Grouped>(
            "Winograd F(2x2,3x3) with the flipped filter, 16-64 channels, tiles in L1"),
       winogradVariant<&winograd::backwardData, Path::Chunked>(
            "Winograd F(2x2,3x3) with the flipped filter, tiles in chunks through one-thread oneDNN GEMMs"),
       winogradVariant<&winograd::backwardData, Path::Chunked4x4>(kWinograd4x4Why),
       {"strided_gemm", "stride 2 as one-thread oneDNN GEMMs on row slices and a scatter of the windows (col2im)", true, &plainAnd<&strided::runs>,
        &strided::pays, &strided::backwardData},
       {"onednn", "oneDNN's direct backward-data convolution, any shape, f32 and bf16", false, &notF64, nullptr,
        &onednnConv2dBackwardData},
       {"onednn_sliced", kSlicedWhy, true, &plainAnd<&sliced::runs>, &never, &sliced::backwardData},
       {"direct_f64", kDirectF64Why, true, &plainAnd<&direct_f64::runs>, nullptr, &direct_f64::backwardData},
       {"reference", kReferenceWhy, true, &referenceRuns, nullptr, &referenceOnPlain<&reference::conv2d_backward_data>}},
      &device, &library, &setting, &widensBf16, &widenedOnCpu};
  return set;
}

const VariantSet& backwardFilterSet() {
  static const VariantSet set{
      "conv2d_backward_filter",
      "cpu",
      {winogradVariant<&winograd::backwardFilter, Path::Grouped>(
            "Winograd filter gradient, 16-32 channels, images in 16 fixed slices"),
       winogradVariant<&winograd::backwardFilter, Path::Chunked>(
            "Winograd filter gradient, tiles in chunks through accumulating one-thread oneDNN GEMMs"),
       winogradVariant<&winograd::backwardFilter, Path::Chunked4x4>(kWinograd4x4Why),
       {"strided_gemm", "stride 2 as im2col and one-thread oneDNN GEMMs on row slices", true, &plainAnd<&strided::runs>, &strided::pays,
        &strided::backwardFilter},
       {"single_channel", "one input channel (a grey-image stem): the nine taps across a block's lanes (oneDNN vectorizes over input channels)", true,
        &plainAnd<&single_channel::runs>, nullptr, &single_channel::backwardFilter},
       {"onednn", "oneDNN's direct backward-weights convolution, any shape, f32 and bf16 (its sums split by thread)", false,
        &notF64, nullptr, &onednnConv2dBackwardFilter},
       {"onednn_sliced", "oneDNN's direct backward weights on fixed slices of the images, one thread each, the slices' "
        "gradients summed in order (at most 64 MiB of them)", true, &plainAnd<&sliced::runs>, &never, &sliced::backwardFilter},
       {"direct_f64", kDirectF64Why, true, &plainAnd<&direct_f64::runs>, nullptr, &direct_f64::backwardFilter},
       {"reference", kReferenceWhy, true, &referenceRuns, nullptr, &referenceOnPlain<&reference::conv2d_backward_filter>}},
      &device, &library, &setting, &widensBf16, &widenedOnCpu};
  return set;
}

const VariantSet& matmulSet() {
  static const VariantSet set{
      "matmul",
      "cpu",
      {{"own", "our f32 GEMM: packed panels through a register tile of FMAs, each sum in k order (oneDNN's AVX2 matmul "
        "is slow where the sum is long)", true, &own_gemm::runs, &own_gemm::pays, &own_gemm::matmul},
       {"onednn", "oneDNN's matmul, f32 and bf16 (its sums may split by thread)", false, &notF64, nullptr, &onednnMatmul},
       {"onednn_sliced", "oneDNN's matmul on fixed slices of the rows (the batch when batched), one thread each", true, &sliced::runs, &never, &sliced::matmul},
       {"reference", "the reference loops in double, for f64", true, &isF64, nullptr, &reference::matmul}},
      &device, &library, &setting, &widensBf16, &widenedOnCpu};
  return set;
}

}  // namespace

const VariantSet& cpuVariants(const std::string& op) {
  static const bool checked = (refuseOldSwitches(), true);
  (void)checked;
  if (op == "conv2d") return forwardSet();
  if (op == "conv2d_backward_data") return backwardDataSet();
  if (op == "conv2d_backward_filter") return backwardFilterSet();
  if (op == "matmul") return matmulSet();
  throw Error("the CPU backend has no variant list for '" + op + "'");
}

std::vector<const VariantSet*> cpuVariantSets() {
  return {&forwardSet(), &backwardDataSet(), &backwardFilterSet(), &matmulSet()};
}

void chooseCpuVariant(KernelCall& call, ChoiceExchange* exchange) {
  if (overNothing(call)) return;  // no variant runs on it (runtime/cpu/EmptySums.cpp)
  const VariantSet& set = cpuVariants(call.step.op);
  if (call.in[0].dtype != DType::bf16 || onednnBf16()) return chooseVariant(call, set, exchange);
  // Emulated bf16 runs the f32 kernels on f32 copies (runtime/device/WidenedBf16.h): choose there.
  std::vector<std::vector<float>> copies;
  auto widen = [&](std::span<const TensorView> views) {
    std::vector<TensorView> wide(views.begin(), views.end());
    for (TensorView& v : wide)
      if (v.dtype == DType::bf16) {
        copies.emplace_back(size_t(v.numel()), 0.5f);
        v.data = copies.back().data(), v.dtype = DType::f32;
      }
    return wide;
  };
  std::vector<TensorView> in = widen(call.in), out = widen(call.out);
  std::shared_ptr<void> cache;
  KernelCall wide{call.step, in, out, cache, call.comm, call.device};
  chooseVariant(wide, set, exchange);
}

std::string cpuKind(std::istream& cpuinfo) {
  std::string name, family, model;
  auto value = [](const std::string& line) {
    const size_t colon = line.find(':');
    const size_t start = colon == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  auto key = [](const std::string& line) {
    const size_t colon = line.find(':');
    const std::string k = line.substr(0, colon == std::string::npos ? 0 : colon);
    return k.substr(0, k.find_last_not_of(" \t") + 1);
  };
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.empty() && !(name.empty() && family.empty() && model.empty())) break;  // the first processor's end
    const std::string k = key(line);
    if (k == "model name" && name.empty()) name = value(line);
    else if (k == "cpu family" && family.empty()) family = value(line);
    else if (k == "model" && model.empty()) model = value(line);
  }
  if (name.empty()) name = "unknown CPU";
  if (family.empty() || model.empty()) return name;
  return name + " (family " + family + " model " + model + ")";
}

}  // namespace spmd::runtime::cpu
