// Element types the runtime moves and computes on, with their sizes and printed names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/base/BFloat16.h"
#include "runtime/base/Error.h"

namespace spmd {

// bf16 is stored as its bits (runtime/base/BFloat16.h); the compiler widens every bf16 op to f32
// around bf16 roundings, so kernels meet it only in convert.
// New values go at the end: Program files store the names, not the numbers.
enum class DType : uint8_t { f32, f64, i32, bf16 };

constexpr size_t dtypeSize(DType t) { return t == DType::f64 ? 8 : t == DType::bf16 ? 2 : 4; }

constexpr std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::bf16: return "bf16";
  }
  return "?";
}

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::f32; }
template <> constexpr DType dtypeOf<double>() { return DType::f64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::i32; }
template <> constexpr DType dtypeOf<bf16>() { return DType::bf16; }

// The error of a kernel or collective handed a bf16 tensor, which only an uncompiled Program
// (written by hand) can do: `what` names it ("a kernel", "a collective across processes").
inline Error bf16NotWidened(std::string_view what) {
  return Error(std::string(what) + " was given a bf16 tensor; bf16 ops and collectives run widened to f32: "
               "compile the program with the spmd pipeline (its spmd-widen-bf16 pass)");
}

// Calls fn(T{}) with T the C++ type of f32 or f64; throws for i32 and for bf16 (which kernels
// compute on only in convert and the ops of runtime/program/Bf16Kernels.h: the compiler widens
// the other bf16 ops to f32, passes/WidenBf16.cpp).
template <typename Fn>
decltype(auto) visitFloat(DType t, Fn&& fn) {
  if (t == DType::f32) return fn(float{});
  if (t == DType::f64) return fn(double{});
  if (t == DType::bf16) throw bf16NotWidened("a kernel");
  throw Error("expected a floating-point tensor (f32 or f64), got " + std::string(dtypeName(t)));
}

}  // namespace spmd
