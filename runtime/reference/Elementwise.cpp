// Reference elementwise kernels: binary ops on equal shapes and unary math, in double.
#include <algorithm>
#include <cmath>

#include "runtime/base/NanRules.h"
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

void add(KernelCall& c) { binary(c, [](double a, double b) { return a + b; }); }
void sub(KernelCall& c) { binary(c, [](double a, double b) { return a - b; }); }
void mul(KernelCall& c) { binary(c, [](double a, double b) { return a * b; }); }
void div(KernelCall& c) { binary(c, [](double a, double b) { return a / b; }); }
void max(KernelCall& c) { binary(c, [](double a, double b) { return nanMax(a, b); }); }
void neg(KernelCall& c) { unary(c, [](double a) { return -a; }); }
void exp(KernelCall& c) { unary(c, [](double a) { return std::exp(a); }); }
void log(KernelCall& c) { unary(c, [](double a) { return std::log(a); }); }
void sqrt(KernelCall& c) { unary(c, [](double a) { return std::sqrt(a); }); }
void relu(KernelCall& c) { unary(c, [](double a) { return reluOf(a); }); }


void greater_equal(KernelCall& c) { binary(c, [](double a, double b) { return a >= b ? 1.0 : 0.0; }); }
// inputs: result_grad, relu result
void relu_backward(KernelCall& c) { binary(c, [](double dy, double y) { return reluGradOf(dy, y); }); }

}  // namespace spmd::runtime::reference
