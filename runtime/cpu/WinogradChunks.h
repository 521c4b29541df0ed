// What the chunked Winograd paths share (runtime/cpu/Winograd.cpp's F(2x2, 3x3) with 16 planes,
// runtime/cpu/Winograd4x4.cpp's F(4x4, 3x3) with 36): transformed tiles in chunks of rows, one
// plane per point of the transform, and the GEMMs of a chunk as one-thread oneDNN matmuls on
// slices of the planes (sliced::Gemm: the same bits on any thread count).
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/cpu/SlicedOnednn.h"

namespace spmd::runtime::cpu::winograd {

// Floats from one of a chunk's planes (V, M, Z: [planes][rows][channels]) to the next: one cache
// line more than the plane, so that the rows a transform writes or reads together do not fall in
// one cache set (rows x channels is a power of two in ResNets).
constexpr int64_t kPlanePad = 16;
inline int64_t planeOf(int64_t rows, int64_t channels) { return rows * channels + kPlanePad; }

// Tiles go through the transforms and GEMMs in chunks of `rows`, so the transformed tiles
// (planes x rows x channels floats, at most setChunkFloats' value) stay in cache between a
// transform and its GEMM and the scratch does not grow with the batch. Chunks are equal; the
// last one's rows past the last tile are zeros.
struct Chunks {
  int64_t rows, count;
  Chunks(int64_t tiles, int64_t channels, int64_t planes);
};

// A step's chunking and its chunks' GEMMs, fixed when the step's kernel is prepared: the forward
// and backward data's, and the backward filter's (the first chunk's GEMMs write dU, the others
// add to it).
struct ConvolveState {
  Chunks chunks;
  sliced::Gemm gemms;
};
struct FilterState {
  Chunks chunks;
  sliced::Gemm first, rest;
};

// The `planes` GEMMs dst[a] = src[a] x weights[a]: src [planes, M, R] (or its transpose, stored
// [planes, R, M], when `transposedSrc`), weights [planes, R, Nc], dst [planes, M, Nc], row-major;
// the chunk's tiles (src, or dst and src when transposed) planeOf apart, the filters whole;
// `accumulate`: dst += instead of =.
sliced::Gemm batchedGemms(int64_t planes, int64_t M, int64_t R, int64_t Nc, bool transposedSrc,
                          bool accumulate = false);
void runGemms(sliced::Gemm& gemms, const float* a, const float* b, float* c);

// The filter transform U (`floats` floats) of the step's weights (call.in[1], OIHW): `rows(o0, o1,
// U)` makes U's rows [o0, o1) of `outer`, taken `grain` at a time by the replica's OpenMP threads.
// Made once per call for the step's in-process replicas whose weights are the same bytes (a
// data-parallel step's replicated parameters), those that need it meanwhile each making parts
// (runtime/device/SharedValues.h); else by this replica alone, in its thread's scratch buffer 1.
const float* transformedFilter(const KernelCall& call, int64_t floats, int64_t outer, int64_t grain,
                               const std::function<void(int64_t, int64_t, float*)>& rows);

// F(4x4, 3x3), chunked (runtime/cpu/Winograd4x4.cpp), on the operands Winograd.h's runs accepts.
void forward4x4(KernelCall& call, const float* bias);
void backwardData4x4(KernelCall& call);
void backwardFilter4x4(KernelCall& call);

}  // namespace spmd::runtime::cpu::winograd
