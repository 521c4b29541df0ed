// The GPU kernels' division by invariant integers (runtime/kernels/Divide.h) against the
// hardware's: every divisor shape (1, powers of two and their neighbours, the BatchNorm planes
// and channel counts of ResNet-18, primes, the largest) on boundary numerators and random ones.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/kernels/Divide.h"

namespace spmd::runtime::kernels {
namespace {

TEST(DivideTest, QuotientsEqualTheHardwaresForEveryDivisorShape) {
  std::vector<uint32_t> divisors{1, 3, 5, 6, 7, 10, 16, 49, 64, 196, 784, 6272, 12544, 50176, 65535, 65537,
                                 1000003, 0x7fffffffu, 0x80000001u, 0xfffffffeu, 0xffffffffu};
  for (int bit = 1; bit < 32; ++bit)
    for (int64_t delta : {-1, 0, 1}) divisors.push_back(uint32_t((int64_t(1) << bit) + delta));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) divisors.push_back(rng() | 1u);
  int64_t checked = 0;
  for (uint32_t d : divisors) {
    const Divider divider = dividerOf(d);
    std::vector<uint32_t> numerators{0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, 0x7fffffffu, 0x80000000u,
                                     0xfffffffeu, 0xffffffffu, 0xffffffffu - 0xffffffffu % d};
    for (int i = 0; i < 2000; ++i) numerators.push_back(rng());
    for (uint32_t n : numerators) {
      ASSERT_EQ(divider.quotient(n), n / d) << n << " / " << d;
      ++checked;
    }
  }
  EXPECT_GT(checked, 500000);
}

}  // namespace
}  // namespace spmd::runtime::kernels
