// DLPack (dlpack.h 0.6, the exchange format of PyTorch's torch.utils.dlpack, JAX, CuPy and
// NumPy): arrays in and out without a copy, in host memory and in a GPU's.
//
//   DLManagedTensor* out = spmd::io::toDLPack(array);   // torch.utils.dlpack.from_dlpack(capsule of it)
//   Array in = spmd::io::fromDLPack(torch_to_dlpack);   // takes it over; no copy
//   Tensor t = spmd::io::tensorFromDLPack(cuda_tensor);  // on its GPU, in place
//
// toDLPack: the tensor points at the Array's bytes (f32, f64, bf16, i32; row-major, strides
// null, device CPU); the Array's storage stays alive until the consumer calls the tensor's
// deleter, exactly once, as the DLPack protocol says. Writing through either side is seen by
// the other. A device-resident Tensor replicated on cpu devices is exported in place (replica
// 0's buffer), and one replicated on cuda devices too (replica 0's device memory, kDLCUDA with
// its GPU's ordinal; the work queued on it is finished first, so any stream may read it); the
// value can then no longer be donated to a call, which would write into it. One split over the
// replicas, or on sim devices, is put together on the host first (a copy).
// fromDLPack: takes ownership of `tensor` when it returns: the Array (and every view of it)
// reads the producer's memory in place, and the tensor's deleter runs once the last of them is
// gone. A tensor not on the host (CUDA memory: tensorFromDLPack, or copy it to the CPU first), of
// another dtype, not row-major contiguous (torch: .contiguous()), or misaligned is refused with
// an error saying which, and is then left to the caller (not consumed).
// tensorFromDLPack: the same for host memory (a Tensor over fromDLPack's Array), and CUDA memory
// becomes a value resident on that GPU (one replica on cuda:<device_id>): a call on that device
// (jit's `devices = "cuda:0"`) binds it in place, and the deleter runs when the last value using
// the memory is gone. The producer's writes must be finished when it is called (DLPack 0.6 carries
// no stream: torch.cuda.synchronize(), or synchronize the stream that wrote it).
#pragma once

#include "frontend/Tensor.h"

struct DLManagedTensor;  // dlpack/dlpack.h (libdlpack-dev): include it to read the struct

namespace spmd::io {

DLManagedTensor* toDLPack(const Array& array);
DLManagedTensor* toDLPack(const Tensor& tensor);
Array fromDLPack(DLManagedTensor* tensor);
Tensor tensorFromDLPack(DLManagedTensor* tensor);

}  // namespace spmd::io
