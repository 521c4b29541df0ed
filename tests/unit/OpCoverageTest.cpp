// Enumerates the dialect's ops and fails if one lacks a CPU kernel or a reference kernel, if a
// kernel table names an op the dialect does not have, or if an op has neither a VJP rule nor an
// explicit mark saying it has none (ZeroGradient, FirstOrderOnly).
#include <gtest/gtest.h>

#include <set>

#include "ir/SpmdDialect.h"
#include "runtime/device/Kernel.h"
#include "runtime/cpu/CpuDevice.h"

namespace spmd {
namespace {

// Ops that lower to something other than a kernel call: constants become initialized buffers;
// value_and_grad and its yield are expanded by the autodiff pass before lowering.
const std::set<std::string> kLoweredWithoutKernel = {"constant", "value_and_grad", "yield"};
// The autodiff structure itself, expanded (innermost first) before any reverse sweep sees it.
const std::set<std::string> kAutodiffStructure = {"value_and_grad", "yield"};

TEST(OpCoverageTest, EveryOpHasCpuAndReferenceKernels) {
  std::vector<std::string> ops = ir::opNames();
  ASSERT_GE(ops.size(), 20u) << "the dialect should define the forward ops of ResNet-18";
  for (const std::string& op : ops) {
    if (kLoweredWithoutKernel.count(op)) continue;
    EXPECT_TRUE(runtime::cpuKernels().count(op)) << "op spmd." << op << " has no CPU kernel";
    EXPECT_TRUE(runtime::referenceKernels().count(op)) << "op spmd." << op << " has no reference kernel";
  }
  std::set<std::string> known(ops.begin(), ops.end());
  for (const auto* table : {&runtime::cpuKernels(), &runtime::referenceKernels()})
    for (const auto& [op, _] : *table) EXPECT_TRUE(known.count(op)) << "kernel for unknown op " << op;
}

TEST(OpCoverageTest, EveryOpHasAVjpRuleOrSaysItHasNone) {
  int rules = 0, marked = 0;
  for (const std::string& op : ir::opNames()) {
    if (kAutodiffStructure.count(op)) continue;
    ir::Differentiation d = ir::differentiation(op);
    EXPECT_NE(d, ir::Differentiation::None)
        << "op spmd." << op << " has no VJP rule (VjpOpInterface) and no ZeroGradient or "
           "FirstOrderOnly mark";
    (d == ir::Differentiation::Vjp ? rules : marked)++;
  }
  std::printf("  %d ops with VJP rules, %d marked as having none\n", rules, marked);
  EXPECT_EQ(ir::differentiation("conv2d"), ir::Differentiation::Vjp);
  EXPECT_EQ(ir::differentiation("argmax"), ir::Differentiation::ZeroGradient);
  EXPECT_EQ(ir::differentiation("conv2d_backward_data"), ir::Differentiation::FirstOrderOnly);
  EXPECT_EQ(ir::differentiation("no_such_op"), ir::Differentiation::None);
}

}  // namespace
}  // namespace spmd
