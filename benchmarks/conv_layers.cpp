// Every convolution shape of the full-width ResNet-18 training step (batch 64, 1x28x28 input):
// a backend's (--device: the CPU's by default, sim, cuda:N) conv2d, conv2d_backward_data and conv2d_backward_filter kernels, each timed
// alone on that shape (median of --reps calls after two warm-up calls that build and cache the
// oneDNN primitive or cuDNN's plan; a GPU's on its own clock), with the activations in the layouts the compiler gives them in the step
// (the backend's blocked layout where the channels fill whole blocks; --layouts plain: NCHW). compare_conv_layers.py runs this beside the same PyTorch primitives.
// Prints the device's name ("result device=..") and, for the CPU, this machine's measured f32 peak ("result peak_gflops=.. threads=.. isa=..") and one line
// per layer: "result layer=<name> count=<uses per step> fwd_ms=.. data_ms=.. filter_ms=.. flops=..
// fwd_variant=.. data_variant=.. filter_variant=..", flops counted as a direct convolution's
// (benchmarks/Flops.h), the same for all three kernels; a variant is the one the kernel chose
// (a cuDNN algorithm's number, "gemm", "winograd_grouped"; "-" for a kernel without variants).
//
// usage: bench_conv_layers [--device cpu] [--batch 64] [--width 64] [--reps 10] [--only <layer>] [--layouts backend|plain] (--help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "Flops.h"
#include "Peak.h"
#include "tools/cli/Cli.h"
#include "runtime/base/Array.h"
#include "runtime/base/Error.h"
#include "runtime/device/Device.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/Program.h"
#include "runtime/program/OpAttrs.h"

namespace {

using spmd::Array;
using spmd::DType;
using spmd::Shape;
using namespace spmd::runtime;

struct Layer {
  std::string name;
  int count;  // convolutions of this shape in one step
  int64_t in, out, size, kernel, stride;
};

// ResNet-18 at `width` on 28x28 (the seeds' model): stem, then per stage the first block's
// (strided) conv1, the 3x3 convs at the stage's size, and the 1x1 strided shortcut.
std::vector<Layer> resnetLayers(int64_t w) {
  return {{"stem", 1, 1, w, 28, 3, 1},
          {"stage1.3x3", 4, w, w, 28, 3, 1},
          {"stage2.0.conv1", 1, w, 2 * w, 28, 3, 2},
          {"stage2.3x3", 3, 2 * w, 2 * w, 14, 3, 1},
          {"stage2.0.conv3", 1, w, 2 * w, 28, 1, 2},
          {"stage3.0.conv1", 1, 2 * w, 4 * w, 14, 3, 2},
          {"stage3.3x3", 3, 4 * w, 4 * w, 7, 3, 1},
          {"stage3.0.conv3", 1, 2 * w, 4 * w, 14, 1, 2},
          {"stage4.0.conv1", 1, 4 * w, 8 * w, 7, 3, 2},
          {"stage4.3x3", 3, 8 * w, 8 * w, 4, 3, 1},
          {"stage4.0.conv3", 1, 4 * w, 8 * w, 7, 1, 2}};
}

Array random(const Shape& shape, uint64_t seed) {
  Array a = Array::zeros(DType::f32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : a.values<float>()) v = normal(rng);
  return a;
}

struct Timed {
  double ms;
  std::string variant;  // the name of the variant the kernel ran, or "-"
};

// Median milliseconds of `reps` calls of kernel `op` on `device` (after two warm-up calls that
// build and cache its plan), on the device's own clock where it has one (CUDA events), else the
// host's around each call; `layouts`: the inputs' then the output's.
Timed timeKernel(Device& device, const std::string& op, const std::vector<Array>& inputs, const Array& output,
                  const std::vector<std::string>& layouts, int64_t stride, int64_t pad, int reps) {
  Step step{op, {}, {}, {{"stride", std::vector<int64_t>{stride, stride}}, {"padding", std::vector<int64_t>{pad, pad}}},
            "bench_conv_layers"};
  decodeAttributes(step);
  std::vector<std::shared_ptr<std::byte>> memory;
  auto place = [&](const Array& a) {
    memory.push_back(device.allocate(a.bytes()));
    device.copyToDevice(memory.back().get(), a.data(), a.bytes());
    return memory.back().get();
  };
  std::vector<TensorView> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({place(inputs[i]), inputs[i].dtype, inputs[i].shape, layouts[i]});
  std::vector<TensorView> out{{place(output), output.dtype, output.shape, layouts.back()}};
  std::shared_ptr<void> cache;
  std::string variant;
  KernelCall call{step, in, out, cache};
  call.device = &device;
  call.variant = &variant;
  KernelFn fn = device.kernels().at(op).fn;
  device.activate();
  fn(call);
  fn(call);
  device.synchronize();
  std::vector<double> times;
  if (std::unique_ptr<DeviceClock> clock = device.clock()) {
    clock->mark();
    for (int r = 0; r < reps; ++r) {
      fn(call);
      clock->mark();
    }
    device.synchronize();
    std::vector<double> marks = clock->seconds();
    for (size_t r = 1; r < marks.size(); ++r) times.push_back((marks[r] - marks[r - 1]) * 1e3);
  } else {
    for (int r = 0; r < reps; ++r) {
      auto start = std::chrono::steady_clock::now();
      fn(call);
      device.synchronize();
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], variant.empty() ? "-" : variant.substr(0, variant.find(':'))};
}

// One result line per layer of resnetLayers(width) (or `only`): its three kernels' medians.
void timeLayers(Device& device, const BlockedLayouts& blocked, int64_t width, int64_t batch, const std::string& only,
                int reps) {
  for (const Layer& l : resnetLayers(width)) {
    if (!only.empty() && l.name != only) continue;
    const int64_t pad = l.kernel / 2, outSize = (l.size + 2 * pad - l.kernel) / l.stride + 1;
    const Shape x{batch, l.in, l.size, l.size}, w{l.out, l.in, l.kernel, l.kernel}, y{batch, l.out, outSize, outSize};
    Array input = random(x, 1), filter = random(w, 2), bias = random({l.out}, 3), dy = random(y, 4);
    Array outY = Array::zeros(DType::f32, y), outX = Array::zeros(DType::f32, x), outW = Array::zeros(DType::f32, w);
    const std::string lx = blocked.blockedLayout(x), ly = blocked.blockedLayout(y);
    Timed forward = timeKernel(device, "conv2d", {input, filter, bias}, outY, {lx, "", "", ly}, l.stride, pad, reps);
    Timed data = timeKernel(device, "conv2d_backward_data", {dy, filter}, outX, {ly, "", lx}, l.stride, pad, reps);
    Timed weights = timeKernel(device, "conv2d_backward_filter", {input, dy}, outW, {lx, ly, ""}, l.stride, pad, reps);
    std::printf("result layer=%s count=%d in=%lld out=%lld size=%lld kernel=%lld stride=%lld fwd_ms=%.4f data_ms=%.4f "
                "filter_ms=%.4f flops=%.0f fwd_variant=%s data_variant=%s filter_variant=%s\n",
                l.name.c_str(), l.count, static_cast<long long>(l.in), static_cast<long long>(l.out),
                static_cast<long long>(l.size), static_cast<long long>(l.kernel), static_cast<long long>(l.stride),
                forward.ms, data.ms, weights.ms, bench::convFlops(double(spmd::numElements(y)), w),
                forward.variant.c_str(), data.variant.c_str(), weights.variant.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64, width = 64;
  int reps = 10;
  std::string only, layoutMode = "backend", deviceName = "cpu";
  spmd::cli::Flags app("bench_conv_layers",
                       "Times every convolution shape of the ResNet-18 training step alone: forward, backward data and "
                       "backward filter (compare_conv_layers.py runs it beside PyTorch).");
  app.whole("--batch", batch, 1, int64_t(1) << 20, "images per call");
  app.whole("--width", width, 1, 4096, "channels of the first stage");
  app.whole("--reps", reps, 1, 1000000, "timed calls per kernel (the median is printed)");
  app.text("--only", only, "time only this layer (e.g. stage2.3x3)", "LAYER");
  app.oneOf("--layouts", layoutMode, {"backend", "plain"},
            "backend: the blocked layouts the step uses; plain: NCHW everywhere");
  app.text("--device", deviceName, "the device whose kernels run: cpu, sim or cuda:N (one device)", "DEVICE");
  if (auto stop = app.parse(argc, argv)) return *stop;
  std::shared_ptr<Device> device;
  std::string activations;  // the backend's activation layout (SPMD_CHANNELS_LAST=1: nhwc on cuda, sim)
  try {
    const DeviceList list = parseDeviceList(deviceName);
    if (list.size() != 1) throw spmd::Error("--device names " + std::to_string(list.size()) + " devices; give one");
    device = makeDevice(list, 0);
    activations = list.driver().activationLayout();
  } catch (const spmd::Error& e) {
    std::fprintf(stderr, "bench_conv_layers: error: --device %s: %s\n", deviceName.c_str(), e.what());
    return 2;
  }
  if (!only.empty()) {
    std::string names;
    bool known = false;
    for (const Layer& l : resnetLayers(width)) {
      names += (names.empty() ? "" : ", ") + l.name;
      known = known || l.name == only;
    }
    if (!known) {
      std::fprintf(stderr, "bench_conv_layers: error: --only %s is not a layer; the layers are %s\n", only.c_str(),
                   names.c_str());
      return 2;
    }
  }
  if (deviceName == "cpu" || deviceName.rfind("cpu:", 0) == 0) {  // the host's FMA peak, for the CPU's kernels
    const bench::Peak peak = bench::measurePeak();
    std::printf("result peak_gflops=%.1f threads=%d isa=%s\n", peak.flops / 1e9, peak.threads, peak.isa.c_str());
  }
  std::printf("result device=%s\n", device->name().c_str());
  const BlockedLayouts blocked(layoutMode == "plain" ? "" : activations);
  try {  // spmd's errors (a bad SPMD_* switch or pin) end the run with their message
    timeLayers(*device, blocked, width, batch, only, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_conv_layers: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
