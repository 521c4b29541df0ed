// Reference elementwise kernels (runtime/base/ElementwiseTable.h): equal shapes, in double.
#include <algorithm>
#include <cmath>

#include "runtime/base/Elementwise.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {
namespace {

template <typename Fn>
void binary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < call.out[0].numel(); ++i)
      call.out[0].as<T>()[i] =
          static_cast<T>(fn(double(call.in[0].as<T>()[i]), double(call.in[1].as<T>()[i])));
  });
}

template <typename Fn>
void unary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < call.out[0].numel(); ++i)
      call.out[0].as<T>()[i] = static_cast<T>(fn(double(call.in[0].as<T>()[i])));
  });
}

}  // namespace

// One kernel per row of the elementwise table, each computing its formula in double.
#define SPMD_REFERENCE_KERNEL(name, Functor, arity, ...)                                     \
  void name(KernelCall& c) {                                                                 \
    if constexpr (arity == 2)                                                                \
      binary(c, [](double a, double b) { return ew::Functor::apply(a, b); });                \
    else                                                                                     \
      unary(c, [](double a) { return ew::Functor::apply(a, a); });                           \
  }
SPMD_ELEMENTWISE_OPS(SPMD_REFERENCE_KERNEL)
#undef SPMD_REFERENCE_KERNEL

}  // namespace spmd::runtime::reference
