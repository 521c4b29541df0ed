#include "runtime/cpu/OwnIsa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <strings.h>

#include "runtime/base/Error.h"

namespace spmd::runtime::cpu {
namespace {

constexpr OwnIsa kAll[] = {OwnIsa::portable, OwnIsa::avx2, OwnIsa::avx512};

// SPMD_MAX_CPU_ISA's cap; unset: none.
OwnIsa environmentCap() {
  static const OwnIsa cap = [] {
    const char* value = std::getenv("SPMD_MAX_CPU_ISA");
    if (!value || !*value) return OwnIsa::avx512;
    for (OwnIsa isa : kAll)
      if (strcasecmp(value, ownIsaName(isa)) == 0) return isa;
    throw Error("SPMD_MAX_CPU_ISA='" + std::string(value) +
                "' is not an instruction set of spmd's own CPU kernels: set it to avx512, avx2 or portable "
                "(the most they may use; oneDNN's is ONEDNN_MAX_CPU_ISA), or unset it");
  }();
  return cap;
}

std::atomic<int> capOverride{-1};  // -1: SPMD_MAX_CPU_ISA decides
std::atomic<bool> ran[3];           // per OwnIsa

}  // namespace

OwnIsa cpuOwnIsa() {
  static const OwnIsa widest = [] {
    // AVX-512 as the kernels' copies are compiled for it (SPMD_TARGET_AVX512).
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return OwnIsa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return OwnIsa::avx2;
    return OwnIsa::portable;
  }();
  return widest;
}

OwnIsa ownIsa() {
  const int forced = capOverride.load(std::memory_order_relaxed);
  const OwnIsa cap = forced < 0 ? environmentCap() : static_cast<OwnIsa>(forced);
  return std::min(cap, cpuOwnIsa());
}

const char* ownIsaName(OwnIsa isa) {
  switch (isa) {
    case OwnIsa::avx512: return "avx512";
    case OwnIsa::avx2: return "avx2";
    case OwnIsa::portable: break;
  }
  return "portable";
}

std::optional<OwnIsa> setOwnIsaCap(std::optional<OwnIsa> cap) {
  const int previous = capOverride.exchange(cap ? static_cast<int>(*cap) : -1);
  if (previous < 0) return std::nullopt;
  return static_cast<OwnIsa>(previous);
}

void markOwnIsaRun(OwnIsa isa) {
  std::atomic<bool>& flag = ran[static_cast<int>(isa)];
  if (!flag.load(std::memory_order_relaxed)) flag.store(true, std::memory_order_relaxed);
}

bool ownIsaRan(OwnIsa isa) { return ran[static_cast<int>(isa)].load(); }

void clearOwnIsaRuns() {
  for (std::atomic<bool>& flag : ran) flag.store(false);
}

}  // namespace spmd::runtime::cpu
