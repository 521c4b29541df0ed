// SPMD_VECTOR_CLONES: put it in a function's __attribute__((...)) to compile it for AVX-512, AVX2
// and the baseline, the loader picking one by the CPU (GCC target_clones). For the host kernels
// whose per-lane loops must vectorize on every machine with the same bits (each lane summing in
// its own fixed order). Such a function inlines nothing compiled without its attributes (an
// `optimize(...)` differing included): write helpers inside it, not as calls.
// ThreadSanitizer instruments the clones' resolver, which the loader runs before TSan's runtime
// is up (a crash at start): TSan builds take the baseline code only.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SPMD_VECTOR_CLONES
#else
#define SPMD_VECTOR_CLONES target_clones("avx512f", "avx2", "default"),
#endif
