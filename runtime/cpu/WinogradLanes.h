// What both chunked Winograd files' vector code shares (runtime/cpu/Winograd.cpp's F(2x2, 3x3),
// runtime/cpu/Winograd4x4.cpp's F(4x4, 3x3)): GCC's generic vectors, their loads and stores,
// and the filter transforms' way in and out: 8 filters at once, one a lane, their 9 taps read
// and written through an 8x8 transpose. Inlined into each ISA copy (cpu/OwnIsa.h); every lane
// takes the same IEEE operations as scalar code, so every copy gives the same bits.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/cpu/OwnIsa.h"

namespace spmd::runtime::cpu::winograd {

// Vectors of L floats: one instruction an element on the copy's widest registers, or several
// narrower ones. Pass them by reference: no vector crosses a call's ABI.
template <int L>
struct Lanes {
  typedef float V __attribute__((vector_size(L * sizeof(float))));
};

// Loads and stores as one unaligned vector access each (a may_alias type of 4-byte alignment):
// GCC 12 split a 32-byte __builtin_memcpy into two 16-byte moves through the stack, and the
// 32-byte read of two 16-byte writes missed store-to-load forwarding (F(4x4, 3x3)'s input
// transform spent about 40% of its cycles there on AMD Zen 2).
template <class V>
SPMD_ISA_BODY void load(V& v, const float* p) {
  typedef float Unaligned __attribute__((vector_size(sizeof(V)), aligned(4), may_alias));
  v = *reinterpret_cast<const Unaligned*>(p);
}
template <class V>
SPMD_ISA_BODY void store(float* p, const V& v) {
  typedef float Unaligned __attribute__((vector_size(sizeof(V)), aligned(4), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}

constexpr int64_t kLanes = 8;  // filters a transform takes at once; divides K and C (blocked)
using FilterVec = Lanes<kLanes>::V;

// Rows r[0..7] of an 8x8 block become its columns (three rounds of pair shuffles).
SPMD_ISA_BODY void transpose8(FilterVec (&r)[8]) {
  FilterVec t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; ++j) {
      u[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * j + 1] = __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int j = 0; j < 4; ++j) {
    r[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// taps[i] = tap i (row-major 3x3) of 8 filters of w (OIHW [K, C, 3, 3]), filter l in lane l:
// forward, w[i0 + l][o]; backward data, w[o][i0 + l] turned 180 degrees.
SPMD_ISA_BODY void loadFilterTaps(const float* __restrict w, int64_t C, bool backwardData, int64_t o, int64_t i0,
                                  FilterVec (&taps)[9]) {
  FilterVec rows[8];  // lane l's 9 taps lie in a row: the first 8 as a vector, transposed
  float last[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) {
    const float* f = w + (backwardData ? o * C + i0 + l : (i0 + l) * C + o) * 9;
    load(rows[l], f);
    last[l] = f[8];
  }
  transpose8(rows);
  for (int i = 0; i < 8; ++i) taps[i] = rows[i];
  load(taps[8], last);
  if (backwardData)
    for (int i = 0; i < 4; ++i) std::swap(taps[i], taps[8 - i]);
}

// dw[k0 + l][c] (OIHW [K, C, 3, 3]) = lane l of taps[0..8].
SPMD_ISA_BODY void storeFilterTaps(const FilterVec (&taps)[9], int64_t C, int64_t k0, int64_t c,
                                   float* __restrict dw) {
  FilterVec rows[8];
  for (int i = 0; i < 8; ++i) rows[i] = taps[i];
  transpose8(rows);
  float last[kLanes];
  store(last, taps[8]);
  for (int64_t l = 0; l < kLanes; ++l) {
    float* f = dw + ((k0 + l) * C + c) * 9;
    store(f, rows[l]);
    f[8] = last[l];
  }
}

}  // namespace spmd::runtime::cpu::winograd
