// Enumerates the dialect's ops and fails if one lacks a CPU kernel or a reference kernel, or if
// a kernel table names an op the dialect does not have.
#include <gtest/gtest.h>

#include <set>

#include "compiler/ir/SpmdDialect.h"
#include "runtime/Kernel.h"
#include "runtime/cpu/CpuDevice.h"

namespace spmd {
namespace {

// Ops that lower to something other than a kernel call: constants become initialized buffers.
const std::set<std::string> kLoweredWithoutKernel = {"constant"};

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

}  // namespace
}  // namespace spmd
