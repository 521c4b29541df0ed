// The backend-neutral Program the compiler hands the runtime: buffers with dtypes and shapes,
// and an ordered list of steps (kernel calls by op name, with attributes) over those buffers.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/Shape.h"

namespace spmd::runtime {

using Attr = std::variant<bool, int64_t, double, std::vector<int64_t>, std::string>;

struct BufferDesc {
  DType dtype = DType::f32;
  Shape shape;
  std::vector<std::byte> constant;  // initial contents for constants; empty otherwise
  // Byte offset in the replica's arena (compiler/PlanMemory); -1: the buffer is not planned
  // (inputs and constants, or a program lowered without a plan) and gets its own allocation.
  int64_t offset = -1;
  // Memory layout (runtime/program/Layouts.h): "" plain row-major; "nChw8c" etc. where the
  // compiler's spmd-assign-layouts pass chose the backend's blocked layout. Same bytes either way.
  std::string layout = {};

  size_t bytes() const { return static_cast<size_t>(numElements(shape)) * dtypeSize(dtype); }
};

struct Step {
  std::string op;                      // dialect op name without prefix: "conv2d"
  std::vector<int> inputs, outputs;    // buffer ids
  std::map<std::string, Attr> attrs;
  std::string location;                // user's "file:line", for errors
  std::string layer = {};              // the nn layer path ("stage2.0.conv1"); empty outside layers

  // "stage2.0.conv1, main.cpp:66" (or just the location): where the step came from.
  std::string where() const;

  const Attr& attr(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  bool flag(const std::string& name) const;  // false when absent
  const std::string& text(const std::string& name) const;
};

struct Program {
  std::string name;
  // The pmap axis the program was compiled for (spmd.axis_name) and its size: the replica count
  // its collectives and pmean divisors assume. A program without an axis (jit) has no
  // collectives; its replicas = 1 and any device count runs independent copies.
  std::string axisName;
  int64_t replicas = 1;
  std::vector<BufferDesc> buffers;
  std::vector<int> inputs, outputs;  // buffer ids, in the function's argument/result order
  std::vector<Step> steps;
  // Size of the one arena holding every planned buffer; 0 when nothing is planned.
  size_t arenaBytes = 0;

  // Human-readable text form, one line per buffer and step.
  std::string toText() const;
};

}  // namespace spmd::runtime
