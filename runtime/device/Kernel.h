// What a backend kernel sees: views of its input and output buffers, the Step (op name and
// attributes), and a per-step cache slot for prepared state (e.g. a oneDNN primitive).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "runtime/base/ElementwiseTable.h"
#include "runtime/program/Catalog.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::span<const int64_t> shape;
  std::string_view layout = {};  // "" plain row-major, else a blocked layout (runtime/program/Layouts.h)

  int64_t numel() const { return numElements(shape); }
  int64_t dim(size_t i) const { return shape[i]; }
  size_t rank() const { return shape.size(); }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

class Communicator;
class Device;
class SharedValues;

// A check of the user's data on the device (a bad label, a bad embedding id): one 64-bit word,
// 0 when every index was good, else ~(position << 32 | index) of the bad index at the lowest
// position (kernels keep the largest word: runtime/kernels/Common.h's indexValid).
using BadIndexFlag = unsigned long long;
// Its bad index and position, when it has one.
inline bool decodeBadIndex(BadIndexFlag flag, int32_t* index, int64_t* position) {
  if (flag == 0) return false;
  const BadIndexFlag word = ~flag;
  *position = int64_t(word >> 32);
  *index = int32_t(uint32_t(word & 0xffffffffu));
  return true;
}

// A check a kernel left on the device: `flag` (device memory) is read after the call's
// end-of-step synchronisation, and `report(index, position)` throws the error when it holds a
// bad index. So a step that checks its data waits on the host only where it would anyway, and
// stays in one graph (runtime/exec/StepGraph.h).
struct DeferredCheck {
  const BadIndexFlag* flag = nullptr;
  std::function<void(int32_t index, int64_t position)> report;
};

struct KernelCall {
  const Step& step;
  std::span<const TensorView> in;
  std::span<const TensorView> out;
  std::shared_ptr<void>& cache;  // empty on the first call of this step; the kernel may fill it
  Communicator* comm = nullptr;  // this replica's collectives; null outside a replica group
  Device* device = nullptr;      // the device running the step (CUDA kernels take its stream)
  // When set, a kernel may leave the rest of its work here (a collective running in the
  // background); the executor calls it before a later step reads the step's outputs.
  std::function<void()>* later = nullptr;
  // When set, a kernel that checks the user's data on the device leaves the check here instead
  // of waiting for its flag (the executor reads it after the step's end; null: check at once).
  DeferredCheck* check = nullptr;
  // When set, a kernel with variants (runtime/device/Variants.h) writes here, on its first call,
  // the variant it runs and why ("winograd_grouped: the fastest of 3 timed (1.204 ms)").
  std::string* variant = nullptr;
  // When set, the values this replica's group makes once per call for its in-process replicas
  // (runtime/device/SharedValues.h), and the step's index there.
  SharedValues* shared = nullptr;
  size_t stepIndex = 0;
};

// The communicator a collective kernel needs; throws naming the op when there is none.
inline Communicator& communicatorOf(const KernelCall& call) {
  if (!call.comm)
    throw Error("collective '" + call.step.op + "' over axis '" + std::get<std::string>(call.step.attr("axis_name")) +
                "' ran outside a replica group; run the function with spmd::pmap");
  return *call.comm;
}

// What axis_index returns: the replica's index along the axis (with gradient accumulation a
// virtual replica's, device * micro-batches + micro-batch), or with `of_device` the device's.
int axisIndexOf(const KernelCall& call);

using KernelFn = void (*)(KernelCall&);

// Class labels index a row of `classes` logits; anything else is the user's data error.
inline void checkLabel(int32_t label, int64_t row, int64_t classes) {
  if (label < 0 || label >= classes)
    throw Error("label " + std::to_string(label) + " at row " + std::to_string(row) +
                " is out of range [0, " + std::to_string(classes) + ")");
}

// Embedding ids index the rows of the table; anything else is the user's data error.
inline void checkId(int32_t id, int64_t position, int64_t rows) {
  if (id < 0 || id >= rows)
    throw Error("embedding id " + std::to_string(id) + " at position " + std::to_string(position) +
                " of the ids is out of range [0, " + std::to_string(rows) + ") (the table's rows)");
}

// take_along_axis and scatter-add indices index `size` places along the axis; anything else is
// the user's data error.
inline void checkTakeIndex(int32_t index, int64_t position, int64_t size) {
  if (index < 0 || index >= size)
    throw Error("index " + std::to_string(index) + " at position " + std::to_string(position) +
                " of the indices is out of range [0, " + std::to_string(size) + ") (the size along the axis)");
}

// A table's kernel for one op and what serves it ("kernels/ (host loop)", "oneDNN (cpu/Conv.cpp)", ...),
// which `spmd-run --kernels BACKEND` prints.
class ChoiceExchange;
struct VariantSet;

struct Kernel {
  KernelFn fn = nullptr;
  std::string_view source;
  // For an op with variants chosen by timing (runtime/device/Variants.h): chooses the step's
  // variant on the buffers of `call`, with a job's processes taking process 0's choice. The
  // executor calls it before a job's first call, when no collective is running.
  void (*choose)(KernelCall& call, ChoiceExchange* exchange) = nullptr;
  const VariantSet* variants = nullptr;  // its variants, for listings (spmd-run --kernels)
  void operator()(KernelCall& call) const { fn(call); }
};
using KernelTable = std::unordered_map<std::string, Kernel>;

// Reference kernels: simple loops, double accumulation; the oracle tests compare backends with.
const KernelTable& referenceKernels();

}  // namespace spmd::runtime
