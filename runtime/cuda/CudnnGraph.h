// One convolution (forward, with its bias and relu fused where cuDNN offers it, backward data or backward
// filter) through cuDNN's graph (backend) API, beside the legacy cudnnConvolution* calls of
// cuda/Conv.cpp: an operation graph of the step's tensors (NCHW or NHWC, packed), the engine
// configurations cuDNN's heuristics rank for it (modes A, then fallback), each with what its
// numerical notes say (nondeterministic; tensor cores or inputs converted down, which strict f32
// refuses), and an execution plan per configuration that is timed or run. A configuration is
// named by its engine's global index and knob choices ("g12.k3=1.k7=0"), so a persisted or pinned
// choice names the same kernels in a later process with that cuDNN. Internal to runtime/cuda;
// SPMD_CUDNN_GRAPH=1 offers these beside the legacy algorithms (runtime/device/Variants.h's
// cudnnGraphEngines; not yet the default: no GPU has run it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/device/KernelChoice.h"

namespace spmd::runtime::cuda {

enum class ConvRole { Forward, BackwardData, BackwardFilter };

// The forward convolution's shapes: x [N, C, H, W], w [O, C, KH, KW], y [N, O, OH, OW]; x and y
// packed NCHW, or NHWC where `xLast` / `yLast` (channels-last; the filter stays OIHW).
struct ConvShapes {
  int64_t x[4], w[4], y[4];
  int64_t stride[2], padding[2];
  bool xLast = false, yLast = false;
};

// The device's properties as cuDNN writes them (a DEVICEPROP descriptor's JSON, cuDNN >= 9.8),
// from a cudnnHandle_t: what lets a later process rank and plan without the device.
std::string devicePropertiesJson(void* handle);

class GraphConv {
 public:
  // Builds the operation graph and ranks its engine configurations (at most `most`, the
  // deterministic ones first); `bias`: a forward convolution adds a per-channel bias in the graph;
  // `relu`: it then takes max(0, y) in the graph (conv2d's relu), and only configurations whose
  // numerical notes promise strict NaN propagation are offered (a NaN stays NaN, as the relu op
  // says). `handle`: a cudnnHandle_t; null builds the graph without a device (its descriptors are
  // checked, and no configuration is ranked). Throws spmd::Error naming cuDNN's status when the
  // graph does not finalize.
  GraphConv(void* handle, ConvRole role, DType dtype, const ConvShapes& shapes, bool bias, bool relu = false,
            int most = 10);
  ~GraphConv();
  GraphConv(const GraphConv&) = delete;
  GraphConv& operator=(const GraphConv&) = delete;

  // Whether the bias add is part of the graph (else the caller adds it).
  bool fusesBias() const;
  // Whether the relu is part of the graph (else the caller takes it).
  bool fusesRelu() const;
  // The configurations as variants, in cuDNN's order.
  const std::vector<Variant>& variants() const { return variants_; }
  // Makes `name`'s execution plan (once) and returns its workspace bytes; throws when the name
  // is not one of variants() or its plan does not finalize.
  size_t prepare(const std::string& name);
  // Runs `name`'s plan (prepare()d) on the handle's stream: x, w, y as the forward convolution
  // names them (for a backward op the gradient tensors in their places), `bias` for a fused one.
  void run(const std::string& name, const void* x, const void* w, const void* y, const void* bias, void* workspace);

 private:
  struct Descriptors;
  std::unique_ptr<Descriptors> d_;
  std::vector<Variant> variants_;
};

}  // namespace spmd::runtime::cuda
