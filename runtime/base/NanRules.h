// NaN semantics shared by every backend, as in PyTorch and JAX: max, min and relu propagate a
// NaN operand; relu's gradient passes the incoming gradient where the result is NaN (PyTorch's
// threshold_backward); argmax returns the index of the first NaN along the axis when there is
// one (numpy, PyTorch and JAX agree); argsort's order puts NaN last (first when descending).
// Written once, used by the reference, CPU and CUDA kernels;
// the CUDA fused-kernel generator emits the same expressions (runtime/kernels/FusedSource.cpp).
#pragma once

#if defined(__CUDACC__)
#define SPMD_HOST_DEVICE __host__ __device__
#else
#define SPMD_HOST_DEVICE
#endif

namespace spmd::runtime {

template <typename T>
SPMD_HOST_DEVICE inline T nanMax(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T>
SPMD_HOST_DEVICE inline T nanMin(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T>
SPMD_HOST_DEVICE inline T reluOf(T x) { return x <= T(0) ? T(0) : x; }
// |x|, +0 for -0 (x + 0 rounds -0 to +0) and NaN for NaN, as torch.abs.
template <typename T>
SPMD_HOST_DEVICE inline T absOf(T x) { return x < T(0) ? -x : x + T(0); }
template <typename T>
SPMD_HOST_DEVICE inline T reluGradOf(T dy, T y) { return y <= T(0) ? T(0) : dy; }
// Whether `v` replaces the best value so far in an argmax scan (the first NaN stays).
template <typename T>
SPMD_HOST_DEVICE inline bool argmaxTakes(T v, T best) { return best == best && (v > best || v != v); }
// argsort's order: whether `a` goes strictly before `b`. Ascending puts NaN after every number
// (numpy's sort), descending before (torch.sort(descending=True), torch.topk); a strict weak
// order in which NaNs, and -0 and +0, are equal, so a stable sort keeps them in index order.
template <typename T>
SPMD_HOST_DEVICE inline bool sortsBefore(T a, T b, bool descending) {
  return descending ? (a > b || (a != a && b == b)) : (a < b || (a == a && b != b));
}

}  // namespace spmd::runtime
