// DLPack in and out of host Arrays (frontend/io/DLPack.h).
#include "frontend/io/DLPack.h"

#include <dlpack/dlpack.h>

#include "runtime/device/DeviceList.h"
#include "runtime/exec/DeviceArray.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::io {
namespace {

DLDataType dlType(DType dtype) {
  switch (dtype) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i32: return {kDLInt, 32, 1};
  }
  throw Error("toDLPack: unknown dtype");
}

std::string typeText(DLDataType t) {
  const char* code = t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint" : t.code == kDLFloat ? "float"
                     : t.code == kDLBfloat ? "bfloat" : "code ";
  std::string text = code + (t.code <= kDLBfloat ? "" : std::to_string(t.code)) + std::to_string(t.bits);
  return t.lanes == 1 ? text : text + "x" + std::to_string(t.lanes);
}

DType ourType(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
    if (t.code == kDLFloat && t.bits == 64) return DType::f64;
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLInt && t.bits == 32) return DType::i32;
  }
  throw Error("fromDLPack: a tensor of " + typeText(t) +
              " has no spmd dtype; give float32, float64, bfloat16 or int32 (torch: .to(torch.float32))");
}

std::string deviceText(DLDevice d) {
  switch (d.device_type) {
    case kDLCUDA: return "CUDA device " + std::to_string(d.device_id);
    case kDLCUDAHost: return "CUDA pinned host memory";
    case kDLROCM: return "ROCm device " + std::to_string(d.device_id);
    case kDLVulkan: return "Vulkan device " + std::to_string(d.device_id);
    case kDLMetal: return "Metal device " + std::to_string(d.device_id);
    default: return "device type " + std::to_string(int(d.device_type));
  }
}

// What keeps exported bytes alive until the consumer's deleter call: an Array, or a
// device-resident value and its buffer.
struct Exported {
  Array array;
  std::vector<int64_t> shape;
  std::shared_ptr<runtime::DeviceArray> resident;
  std::shared_ptr<std::byte> buffer;
};

DLManagedTensor* exportBytes(Exported* exported, void* data, DType dtype, DLDevice device = {kDLCPU, 0}) {
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor.data = data;
  managed->dl_tensor.device = device;
  managed->dl_tensor.ndim = int32_t(exported->shape.size());
  managed->dl_tensor.dtype = dlType(dtype);
  managed->dl_tensor.shape = exported->shape.data();
  managed->dl_tensor.strides = nullptr;  // row-major, compact
  managed->dl_tensor.byte_offset = 0;
  managed->manager_ctx = exported;
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<Exported*>(self->manager_ctx);
    delete self;
  };
  return managed;
}

}  // namespace

DLManagedTensor* toDLPack(const Array& array) {
  return exportBytes(new Exported{array, std::vector<int64_t>(array.shape.begin(), array.shape.end()), nullptr, nullptr},
                     array.data(), array.dtype);
}

DLManagedTensor* toDLPack(const Tensor& tensor) {
  const std::shared_ptr<runtime::DeviceArray>& resident = tensor.resident();
  const bool replicated = resident && resident->layout() == runtime::DeviceArray::Layout::Replicated;
  const int gpu = replicated ? resident->device(0)->cudaOrdinal() : -1;
  if (!replicated || (!resident->hostMemory() && gpu < 0))
    return toDLPack(tensor.array());  // on the host already, or assembled there (a copy)
  std::shared_ptr<std::byte> buffer = resident->buffer(0);  // replica 0's copy, in place
  if (gpu >= 0) resident->device(0)->synchronize();       // what the calls queued on it, written
  resident->lend("a DLPack consumer");
  const Shape& shape = resident->globalShape();
  return exportBytes(new Exported{Array{}, std::vector<int64_t>(shape.begin(), shape.end()), resident, buffer},
                     buffer.get(), resident->dtype(), gpu >= 0 ? DLDevice{kDLCUDA, gpu} : DLDevice{kDLCPU, 0});
}

namespace {

// What a producer's tensor holds, checked: its dtype, shape and first byte.
struct Checked {
  DType dtype;
  Shape shape;
  std::byte* data;
};

Checked checkedTensor(const DLTensor& t, const char* what) {
  const DType dtype = ourType(t.dtype);
  if (t.ndim < 0) throw Error(std::string(what) + ": the tensor has " + std::to_string(t.ndim) + " dimensions");
  Shape shape;
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      throw Error(std::string(what) + ": dimension " + std::to_string(d) + " has size " + std::to_string(t.shape[d]));
    shape.push_back(t.shape[d]);
  }
  if (t.strides) {  // row-major compact, dimensions of size 1 aside
    int64_t expected = 1;
    for (int32_t d = t.ndim - 1; d >= 0; --d) {
      if (shape[size_t(d)] != 1 && t.strides[d] != expected) {
        std::string strides;
        for (int32_t k = 0; k < t.ndim; ++k) strides += (k ? ", " : "") + std::to_string(t.strides[k]);
        throw Error(std::string(what) + ": a tensor of shape " + shapeString(shape) + " with strides [" + strides +
                    "] (in elements) is not row-major contiguous; make it so first (torch: .contiguous())");
      }
      expected *= shape[size_t(d)];
    }
  }
  const size_t bytes = size_t(numElements(shape)) * dtypeSize(dtype);
  auto* data = static_cast<std::byte*>(t.data) + t.byte_offset;
  if (bytes > 0 && !t.data) throw Error(std::string(what) + ": a tensor of shape " + shapeString(shape) + " has no data");
  if (reinterpret_cast<uintptr_t>(data) % dtypeSize(dtype) != 0)
    throw Error(std::string(what) + ": the tensor's data is not aligned to its " + std::to_string(dtypeSize(dtype)) +
                "-byte elements; copy it first");
  return {dtype, std::move(shape), data};
}

bool inHostMemory(DLDevice d) { return d.device_type == kDLCPU || d.device_type == kDLCUDAHost; }

}  // namespace

Array fromDLPack(DLManagedTensor* managed) {
  if (!managed) throw Error("fromDLPack: the tensor is null");
  const DLTensor& t = managed->dl_tensor;
  if (!inHostMemory(t.device))
    throw Error("fromDLPack: the tensor lives on " + deviceText(t.device) + ", not in host memory; " +
                (t.device.device_type == kDLCUDA ? "io::tensorFromDLPack takes it onto that GPU in place, or copy it to "
                                                   "the CPU first (torch: .cpu())"
                                                 : "copy it to the CPU first (torch: .cpu())"));
  Checked c = checkedTensor(t, "fromDLPack");
  const size_t bytes = size_t(numElements(c.shape)) * dtypeSize(c.dtype);
  auto storage = std::make_shared<ArrayStorage>(c.data, bytes, [managed] {
    if (managed->deleter) managed->deleter(managed);
  });
  return Array{c.dtype, std::move(c.shape), std::move(storage)};
}

Tensor tensorFromDLPack(DLManagedTensor* managed) {
  if (!managed) throw Error("tensorFromDLPack: the tensor is null");
  const DLTensor& t = managed->dl_tensor;
  if (inHostMemory(t.device)) return Tensor(fromDLPack(managed));
  if (t.device.device_type != kDLCUDA)
    throw Error("tensorFromDLPack: the tensor lives on " + deviceText(t.device) +
                ", which spmd does not run on; copy it to the CPU first");
  Checked c = checkedTensor(t, "tensorFromDLPack");
  const std::string devices = "cuda:" + std::to_string(t.device.device_id);
  std::shared_ptr<runtime::Device> device;
  try {
    device = runtime::makeDevice(runtime::parseDeviceList(devices), 0);
  } catch (const Error& e) {
    throw Error("tensorFromDLPack: the tensor lives on " + deviceText(t.device) + ", which this process cannot use: " +
                e.what());
  }
  std::shared_ptr<std::byte> buffer(c.data, [managed](std::byte*) {
    if (managed->deleter) managed->deleter(managed);
  });
  auto resident = std::make_shared<runtime::DeviceArray>(c.dtype, c.shape, c.shape, runtime::DeviceArray::Layout::Replicated,
                                                         std::vector{std::move(device)}, std::vector{std::move(buffer)});
  return Tensor(std::move(resident));
}

}  // namespace spmd::io
