// Element types the runtime moves and computes on, with their sizes and printed names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/base/Error.h"

namespace spmd {

enum class DType : uint8_t { f32, f64, i32 };

constexpr size_t dtypeSize(DType t) { return t == DType::f64 ? 8 : 4; }

constexpr std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
  }
  return "?";
}

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::f32; }
template <> constexpr DType dtypeOf<double>() { return DType::f64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::i32; }

// Calls fn(T{}) with T the C++ type of a floating dtype; throws for i32.
template <typename Fn>
decltype(auto) visitFloat(DType t, Fn&& fn) {
  if (t == DType::f32) return fn(float{});
  if (t == DType::f64) return fn(double{});
  throw Error("expected a floating-point tensor (f32 or f64), got " + std::string(dtypeName(t)));
}

}  // namespace spmd
