// A small C interface over spmd::io::toDLPack / fromDLPack / tensorFromDLPack, loaded by
// tests/dlpack/torch_exchange.py through ctypes so that PyTorch and spmd hand tensors to each
// other in one process: host arrays, and values resident on spmd's devices (cpu, or a GPU's
// memory on cuda, where PyTorch's CUDA tensors come and go in place).
#include <cstring>
#include <string>
#include <vector>

#include "frontend/io/DLPack.h"
#include "frontend/spmd.h"
#include "runtime/exec/DeviceArray.h"

namespace {

std::vector<spmd::Array> kept;  // imported arrays, holding the producer's memory until release
std::vector<spmd::Tensor> keptTensors;  // imported values (spmd_import_value), likewise
std::string lastError;

spmd::DType dtypeOf(int code) {
  switch (code) {
    case 0: return spmd::DType::f32;
    case 1: return spmd::DType::f64;
    case 2: return spmd::DType::bf16;
    default: return spmd::DType::i32;
  }
}

// The values spmd_export writes: v_i = i * 0.5 - 3 (i32: i * 3 - 7).
spmd::Array exportedValues(int code, int64_t n) {
  spmd::Array a = spmd::Array::zeros(dtypeOf(code), {n});
  for (int64_t i = 0; i < n; ++i) {
    const double v = code == 3 ? double(i * 3 - 7) : double(i) * 0.5 - 3;
    switch (a.dtype) {
      case spmd::DType::f32: a.values<float>()[i] = float(v); break;
      case spmd::DType::f64: a.values<double>()[i] = v; break;
      case spmd::DType::bf16: a.values<spmd::bf16>()[i] = spmd::toBf16(float(v)); break;
      case spmd::DType::i32: a.values<int32_t>()[i] = int32_t(v); break;
    }
  }
  return a;
}

double sumOf(const spmd::Array& a) {
  double total = 0;
  for (int64_t i = 0; i < a.numel(); ++i) switch (a.dtype) {
      case spmd::DType::f32: total += a.values<float>()[i]; break;
      case spmd::DType::f64: total += a.values<double>()[i]; break;
      case spmd::DType::bf16: total += spmd::fromBf16(a.values<spmd::bf16>()[i]); break;
      case spmd::DType::i32: total += a.values<int32_t>()[i]; break;
    }
  return total;
}

// A call of one replica on `devices` ("cpu:1", "cuda:0") whose result stays there: v + v, or v
// itself for i32 (spmd's arithmetic takes floating-point values; a returned argument is copied
// into a buffer of the call's own). `inPlace` counts the arguments the call bound where they were
// instead of copying them.
spmd::Tensor callOn(const char* devices, const spmd::Tensor& v, int* inPlace = nullptr) {
  auto call = [&](auto body) {
    auto f = spmd::pmap(body, {.inAxes = {spmd::replicated}, .outAxes = {spmd::replicated}, .devices = devices});
    spmd::Tensor result = f(v);
    if (inPlace) *inPlace = f.lastCall().argumentsInPlace;
    return result;
  };
  if (v.dtype() == spmd::DType::i32) return call([](const spmd::Tensor& x) { return x; });
  return call([](const spmd::Tensor& x) { return x + x; });
}

}  // namespace

extern "C" {

// An Array of `n` values v_i = i * 0.5 - 3 (i32: i * 3 - 7) in dtype `code` (0 f32, 1 f64,
// 2 bf16, 3 i32), exported; `data` gets its bytes' address.
DLManagedTensor* spmd_export(int code, int64_t n, void** data) {
  spmd::Array a = exportedValues(code, n);
  *data = a.data();
  return spmd::io::toDLPack(a);
}

// The same values, through a call on `devices` (one replica: "cpu:1", "cuda:0"; callOn:
// doubled, i32 as they are), exported where the call left them; `data` gets the address of spmd's buffer on that device. Null with
// the error in spmd_error() when the call or the export fails.
DLManagedTensor* spmd_export_value(const char* devices, int code, int64_t n, void** data) {
  try {
    spmd::Tensor result = callOn(devices, spmd::Tensor(exportedValues(code, n)));
    if (!result.onDevices()) throw spmd::Error("the call's result is not resident on " + std::string(devices));
    *data = result.resident()->buffer(0).get();
    return spmd::io::toDLPack(result);
  } catch (const std::exception& e) {
    lastError = e.what();
    return nullptr;
  }
}

// Takes `tensor` over (kept until spmd_release); returns its data address and the sum of its
// values in `sum`, or null with the error in spmd_error() (the tensor then not consumed).
void* spmd_import(DLManagedTensor* tensor, double* sum) {
  try {
    spmd::Array a = spmd::io::fromDLPack(tensor);
    *sum = sumOf(a);
    kept.push_back(a);
    return a.data();
  } catch (const std::exception& e) {
    lastError = e.what();
    return nullptr;
  }
}

// Takes `tensor` over as a value (host memory, or resident on its GPU: tensorFromDLPack), kept
// until spmd_release, and passes it to a call on `devices` (callOn), whose result's sum goes to
// `sum` and whose count of arguments bound in place (not copied) to `in_place`. Returns the
// address spmd reads the value at (the GPU buffer's for a resident one) once the tensor is taken
// over, even when the call then fails (spmd_error() says why, "" when nothing failed); null, with
// the error, when the tensor was refused and is still the caller's.
void* spmd_import_value(DLManagedTensor* tensor, const char* devices, double* sum, int* in_place) {
  lastError.clear();
  spmd::Tensor value;
  try {
    value = spmd::io::tensorFromDLPack(tensor);
  } catch (const std::exception& e) {
    lastError = e.what();
    return nullptr;
  }
  keptTensors.push_back(value);
  void* address = value.onDevices() ? static_cast<void*>(value.resident()->buffer(0).get()) : value.array().data();
  try {
    *sum = sumOf(callOn(devices, value, in_place).array());
  } catch (const std::exception& e) {
    lastError = e.what();
  }
  return address;
}

const char* spmd_error() { return lastError.c_str(); }

// Lets go of the imported arrays and values (their producers' deleters run); returns how many.
int spmd_release() {
  const int n = int(kept.size() + keptTensors.size());
  kept.clear();
  keptTensors.clear();
  return n;
}

}  // extern "C"
