// Our own CPU kernels' ISA copies (runtime/cpu/OwnIsa.h): every kernel case that reaches our
// code (the Winograd transforms and grouped GEMMs, the single-channel filter gradient, the blocked
// BatchNorm statistics and backward, the blocked channel sums, f32 <-> bf16) gives the portable
// copy's bits on AVX2 and on AVX-512, where this CPU has them, and the copy asked for is the one
// that ran (each copy marks that it ran). The cap's own rules: it never raises the CPU's ISA.
#include <cstring>
#include <map>
#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/OwnIsa.h"

namespace spmd::runtime {
namespace {

using cpu::OwnIsa;

// Restores the cap a test changed.
class IsaCap {
 public:
  explicit IsaCap(OwnIsa isa) : previous_(cpu::setOwnIsaCap(isa)) {}
  ~IsaCap() { cpu::setOwnIsaCap(previous_); }

 private:
  std::optional<OwnIsa> previous_;
};

// The pins under which each op's own variants run (conv cases: each of our convolutions in turn).
std::vector<std::string> pinsFor(const std::string& op) {
  if (op == "conv2d" || op == "conv2d_backward_data")
    return {op + ":winograd_grouped", op + ":winograd_chunked", op + ":winograd_4x4", op + ":direct_f64"};
  if (op == "conv2d_backward_filter")
    return {op + ":winograd_grouped", op + ":winograd_chunked", op + ":winograd_4x4", op + ":single_channel",
            op + ":direct_f64"};
  return {""};
}

std::vector<OwnIsa> vectorIsas() {
  std::vector<OwnIsa> isas;
  for (OwnIsa isa : {OwnIsa::avx2, OwnIsa::avx512})
    if (isa <= cpu::cpuOwnIsa()) isas.push_back(isa);
  return isas;
}

// The kernel cases, and f32 <-> bf16 conversions (the kernel cases' convert is f32 <-> f64).
std::vector<KernelCase> cases() {
  std::vector<KernelCase> list = kernelCases(DType::f32);
  for (const KernelCase& c : kernelCases(DType::f64)) list.push_back(c);
  list.push_back({"convert to bf16", "convert", {spmd::testing::randomArray(DType::f32, {3, 70}, 7, -5, 5)},
                  {{DType::bf16, {3, 70}}}, {}});
  list.push_back({"convert from bf16", "convert", {spmd::testing::randomArray(DType::bf16, {3, 70}, 8, -5, 5)},
                  {{DType::f32, {3, 70}}}, {}});
  return list;
}

// The variant that ran ("name: why"): its name.
std::string variantName(const std::string& ran) { return ran.substr(0, ran.find(':')); }

TEST(OwnIsaTest, EveryCopyGivesThePortableBits) {
  const std::vector<OwnIsa> isas = vectorIsas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX2 with FMA nor AVX-512: the portable copy only";
  std::map<OwnIsa, std::set<std::string>> reached;  // ops whose cases ran each copy
  int compared = 0;
  for (const KernelCase& c : cases())
    for (const std::string& pins : pinsFor(c.op)) {
      SCOPED_TRACE(c.name + " pinned '" + pins + "'");
      PinnedKernels pin(pins);
      std::vector<Array> portable;
      std::string portableRan;
      {
        IsaCap cap(OwnIsa::portable);
        portable = runKernel(cpuKernels(), c, &portableRan);
      }
      // A pin where its variant does not run leaves the choice to timing, which may differ by
      // ISA (the choice's key names it) and so give other bits: those pairs are not compared.
      const std::string pinned = pins.empty() ? "" : pins.substr(pins.find(':') + 1);
      if (!pinned.empty() && variantName(portableRan) != pinned) continue;
      for (OwnIsa isa : isas) {
        SCOPED_TRACE(cpu::ownIsaName(isa));
        IsaCap cap(isa);
        cpu::clearOwnIsaRuns();
        std::string ran;
        std::vector<Array> vector = runKernel(cpuKernels(), c, &ran);
        if (variantName(ran) != variantName(portableRan)) continue;  // timed differently (matmul)
        if (cpu::ownIsaRan(isa)) reached[isa].insert(c.op);
        ++compared;
        ASSERT_EQ(vector.size(), portable.size());
        for (size_t i = 0; i < vector.size(); ++i) {
          ASSERT_EQ(vector[i].bytes(), portable[i].bytes());
          EXPECT_EQ(std::memcmp(vector[i].data(), portable[i].data(), vector[i].bytes()), 0)
              << "output " << i << " (" << ran << ")";
        }
      }
    }
  EXPECT_GT(compared, 100);
  // Every op family with our own vector code reached each copy.
  for (OwnIsa isa : isas)
    for (const char* op : {"conv2d", "conv2d_backward_data", "conv2d_backward_filter", "batch_norm_train",
                           "batch_norm_train_backward", "reduce_sum", "convert"})
      EXPECT_TRUE(reached[isa].count(op)) << op << " never ran our " << cpu::ownIsaName(isa) << " copy";
}

TEST(OwnIsaTest, TheCapLowersTheIsaAndNeverRaisesIt) {
  const OwnIsa widest = cpu::cpuOwnIsa();
  for (OwnIsa isa : {OwnIsa::portable, OwnIsa::avx2, OwnIsa::avx512}) {
    IsaCap cap(isa);
    EXPECT_EQ(cpu::ownIsa(), std::min(isa, widest)) << cpu::ownIsaName(isa);
  }
  EXPECT_STREQ(cpu::ownIsaName(OwnIsa::avx512), "avx512");
  EXPECT_STREQ(cpu::ownIsaName(OwnIsa::portable), "portable");
}

}  // namespace
}  // namespace spmd::runtime
