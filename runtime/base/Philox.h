// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind spmd's random ops and keys: four 32-bit words of output are a
// pure function of a 128-bit counter and a 64-bit key, so any element of any stream is computed
// independently, on any backend, in any order, with the same bits. Written once for the host
// and the GPU (SPMD_HOST_DEVICE); checked against the Random123 known-answer vectors.
#pragma once

#include <cstdint>

#include "runtime/base/NanRules.h"  // SPMD_HOST_DEVICE

namespace spmd::runtime::philox {

struct Words {
  uint32_t w[4];
};

SPMD_HOST_DEVICE inline Words philox4x32(Words counter, uint32_t key0, uint32_t key1) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t* c = counter.w;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    Words next{{uint32_t(p1 >> 32) ^ c[1] ^ key0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ key1, uint32_t(p0)}};
    counter = next;
    key0 += kW0;
    key1 += kW1;
  }
  return counter;
}

// Counter word 3 separates the uses of one key: random bits count blocks with word 3 = 0;
// deriving keys uses these tags, so a derived key never equals a block of random bits.
constexpr uint32_t kFoldInTag = 0x666f6c64u;  // "fold"
constexpr uint32_t kSplitTag = 0x73706c74u;   // "splt"

// The key derived from `key` and `data` (jax.random.fold_in's role).
SPMD_HOST_DEVICE inline void foldIn(const uint32_t key[2], uint32_t data, uint32_t out[2]) {
  Words r = philox4x32(Words{{data, 0, 0, kFoldInTag}}, key[0], key[1]);
  out[0] = r.w[0];
  out[1] = r.w[1];
}

// Element i of the stream of `key`: the 32-bit word i % 4 of block i / 4.
SPMD_HOST_DEVICE inline uint32_t bits32(uint32_t key0, uint32_t key1, uint64_t i) {
  uint64_t block = i >> 2;
  return philox4x32(Words{{uint32_t(block), uint32_t(block >> 32), 0, 0}}, key0, key1).w[i & 3];
}

// Uniform in [0, 1) from the stream: f32 from the top 24 bits of word i; f64 from the top 53
// bits of words 2i and 2i + 1 (the same block).
SPMD_HOST_DEVICE inline float uniformF32(uint32_t key0, uint32_t key1, uint64_t i) {
  return float(bits32(key0, key1, i) >> 8) * (1.0f / 16777216.0f);
}
SPMD_HOST_DEVICE inline double uniformF64(uint32_t key0, uint32_t key1, uint64_t i) {
  uint64_t block = i >> 1;
  Words r = philox4x32(Words{{uint32_t(block), uint32_t(block >> 32), 0, 0}}, key0, key1);
  uint32_t hi = r.w[(i & 1) * 2], lo = r.w[(i & 1) * 2 + 1];
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace spmd::runtime::philox
