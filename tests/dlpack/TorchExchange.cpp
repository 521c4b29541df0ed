// A small C interface over spmd::io::toDLPack / fromDLPack, loaded by tests/dlpack/torch_exchange.py
// through ctypes so that PyTorch and spmd hand tensors to each other in one process.
#include <cstring>
#include <string>
#include <vector>

#include "frontend/io/DLPack.h"

namespace {

std::vector<spmd::Array> kept;  // imported arrays, holding the producer's memory until release
std::string lastError;

spmd::DType dtypeOf(int code) {
  switch (code) {
    case 0: return spmd::DType::f32;
    case 1: return spmd::DType::f64;
    case 2: return spmd::DType::bf16;
    default: return spmd::DType::i32;
  }
}

}  // namespace

extern "C" {

// An Array of `n` values v_i = i * 0.5 - 3 (i32: i * 3 - 7) in dtype `code` (0 f32, 1 f64,
// 2 bf16, 3 i32), exported; `data` gets its bytes' address.
DLManagedTensor* spmd_export(int code, int64_t n, void** data) {
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
  *data = a.data();
  return spmd::io::toDLPack(a);
}

// Takes `tensor` over (kept until spmd_release); returns its data address and the sum of its
// values in `sum`, or null with the error in spmd_error() (the tensor then not consumed).
void* spmd_import(DLManagedTensor* tensor, double* sum) {
  try {
    spmd::Array a = spmd::io::fromDLPack(tensor);
    double total = 0;
    for (int64_t i = 0; i < a.numel(); ++i) switch (a.dtype) {
        case spmd::DType::f32: total += a.values<float>()[i]; break;
        case spmd::DType::f64: total += a.values<double>()[i]; break;
        case spmd::DType::bf16: total += spmd::fromBf16(a.values<spmd::bf16>()[i]); break;
        case spmd::DType::i32: total += a.values<int32_t>()[i]; break;
      }
    *sum = total;
    kept.push_back(a);
    return a.data();
  } catch (const std::exception& e) {
    lastError = e.what();
    return nullptr;
  }
}

const char* spmd_error() { return lastError.c_str(); }

// Lets go of the imported arrays (their producers' deleters run); returns how many.
int spmd_release() {
  const int n = int(kept.size());
  kept.clear();
  return n;
}

}  // extern "C"
