// Enumerates the dialect's ops and fails if one lacks a CPU kernel or a reference kernel, if a
// kernel table names an op the dialect does not have, or if an op has neither a VJP rule nor an
// explicit mark saying it has none (ZeroGradient, FirstOrderOnly).
#include <gtest/gtest.h>

#include <set>

#include "ir/SpmdDialect.h"
#include "runtime/device/Kernel.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/Driver.h"
#include "runtime/program/OpAttrs.h"
#include "TestUtil.h"

namespace spmd {
namespace {

// Ops that lower to something other than a kernel call: constants become initialized buffers;
// value_and_grad, custom_vjp and their yields are expanded by the autodiff pass before lowering;
// stop_gradient is folded away after it.
const std::set<std::string> kLoweredWithoutKernel = {"constant", "value_and_grad", "custom_vjp", "yield",
                                                     "stop_gradient"};
// The autodiff structure itself, expanded (innermost first) before any reverse sweep sees it.
const std::set<std::string> kAutodiffStructure = {"value_and_grad", "custom_vjp", "yield"};

// Every backend this build has (cpu, sim and, where nvcc was found, cuda) and the reference.
TEST(OpCoverageTest, EveryOpHasAKernelOnEveryBackendThatSaysWhatServesIt) {
  std::vector<std::string> ops = ir::opNames();
  ASSERT_GE(ops.size(), 20u) << "the dialect should define the forward ops of ResNet-18";
  std::vector<std::pair<std::string, const runtime::KernelTable*>> tables = {{"reference", &runtime::referenceKernels()}};
  for (const std::string& backend : runtime::driverNames())
    tables.emplace_back(backend, &runtime::driverFor(backend, backend).kernels());
  ASSERT_GE(tables.size(), 3u) << "the cpu and sim backends are always built";
  std::set<std::string> known(ops.begin(), ops.end());
  for (const auto& [backend, table] : tables) {
    for (const std::string& op : ops) {
      if (kLoweredWithoutKernel.count(op)) continue;
      auto it = table->find(op);
      EXPECT_TRUE(it != table->end()) << "op spmd." << op << " has no " << backend << " kernel";
      if (it != table->end()) {
        EXPECT_FALSE(it->second.source.empty()) << backend << " does not say what serves " << op;
      }
    }
    for (const auto& [op, _] : *table) EXPECT_TRUE(known.count(op)) << backend << " has a kernel for unknown op " << op;
  }
  // The tables are the library plus each backend's own: the CPU's pooling is the library's
  // host loop, its convolution oneDNN; sim's pooling the library on its stream thread.
  EXPECT_NE(runtime::cpuKernels().at("reduce_window").source.find("kernel library"), std::string_view::npos);
  EXPECT_NE(runtime::cpuKernels().at("conv2d").source.find("oneDNN"), std::string_view::npos);
  EXPECT_NE(runtime::driverFor("sim", "sim").kernels().at("softmax").source.find("kernel library"), std::string_view::npos);
}

// The Program contract (runtime/program/Catalog.h) and the dialect name the same ops and spell
// the reductions alike, case by case (the dialect's ODS enum, ir/SpmdEnums.td).
TEST(OpCoverageTest, TheDialectAndTheProgramCatalogAgree) {
  for (const std::string& op : ir::opNames())
    if (!kLoweredWithoutKernel.count(op)) {
      EXPECT_TRUE(runtime::isProgramOp(op)) << "op spmd." << op << " is not in SPMD_PROGRAM_OPS";
    }
  std::vector<std::string> ops = ir::opNames();
  std::set<std::string> dialect(ops.begin(), ops.end());
#define SPMD_IN_DIALECT(name, ...) EXPECT_TRUE(dialect.count(#name)) << "catalog op " #name " is not in the dialect";
  SPMD_PROGRAM_OPS(SPMD_IN_DIALECT)
#undef SPMD_IN_DIALECT
  EXPECT_FALSE(runtime::isProgramOp("conv3d"));
  for (runtime::Reduction r : runtime::kReductions) {
    std::optional<ir::Reduction> typed = ir::symbolizeReduction(runtime::reductionName(r));
    ASSERT_TRUE(typed.has_value()) << "the dialect has no reduction " << runtime::reductionName(r);
    EXPECT_EQ(int(*typed), int(r)) << runtime::reductionName(r);
  }
  EXPECT_EQ(size_t(ir::getMaxEnumValForReduction()) + 1, std::size(runtime::kReductions));
}

// The catalog's attributes of each op are the dialect's (ODS) attributes of the op, by name;
// `fused` steps carry the `body` lowering writes (and the `segments` horizontal batching writes).
TEST(OpCoverageTest, TheCatalogsAttributesAreTheDialects) {
  mlir::MLIRContext context;
  context.loadDialect<ir::SpmdDialect>();
  int checked = 0;
  for (const std::string& op : ir::opNames()) {
    if (kLoweredWithoutKernel.count(op)) continue;
    std::optional<mlir::RegisteredOperationName> info = mlir::RegisteredOperationName::lookup("spmd." + op, &context);
    ASSERT_TRUE(info.has_value()) << op;
    std::set<std::string> dialect, catalog;
    for (mlir::StringAttr name : info->getAttributeNames()) dialect.insert(name.str());
    for (const runtime::AttrSpec& spec : runtime::programAttributes(op)) catalog.insert(std::string(spec.name));
    if (op == "fused") dialect.insert("body"), dialect.insert("segments");  // compiler/BatchFused's
    std::string d, c;
    for (const auto& n : dialect) d += n + " ";
    for (const auto& n : catalog) c += n + " ";
    EXPECT_EQ(catalog, dialect) << "op " << op << ": the catalog (runtime/program/OpAttrs.h) has [" << c
                                << "], the dialect [" << d << "]";
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// A step's attributes decoded into its op's typed record: values as written (the reduction as
// its enum, an absent optional flag false), and what cannot be decoded an error naming the
// step, the attribute and what was wrong; a kernel reading an undecoded step is told it is a bug.
TEST(OpCoverageTest, AttributesDecodeIntoTheOpsTypedRecord) {
  using namespace runtime;
  Step conv{"conv2d", {}, {}, {{"stride", std::vector<int64_t>{2, 1}}, {"padding", std::vector<int64_t>{1, 0}}}, "m.cpp:3"};
  decodeAttributes(conv);
  EXPECT_EQ(convAttrs(conv).stride, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(convAttrs(conv).padding, (std::vector<int64_t>{1, 0}));
  EXPECT_FALSE(convAttrs(conv).relu);
  Step convRelu{"conv2d", {}, {}, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0}}, {"relu", true}}, "m.cpp:6"};
  decodeAttributes(convRelu);
  EXPECT_TRUE(convAttrs(convRelu).relu);
  Step convData{"conv2d_backward_data", {}, {}, {{"stride", std::vector<int64_t>{1, 2}}, {"padding", std::vector<int64_t>{0, 1}}}, "m.cpp:7"};
  decodeAttributes(convData);
  EXPECT_EQ(convAttrs(convData).stride, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(convAttrs(convData).relu);
  Step reduce{"all_reduce", {}, {}, {{"axis_name", std::string("batch")}, {"reduction", std::string("max")}}, "m.cpp:4"};
  decodeAttributes(reduce);
  EXPECT_EQ(attrsOf<AllReduceAttrs>(reduce).reduction, Reduction::Max);
  EXPECT_EQ(attrsOf<AllReduceAttrs>(reduce).axis_name, "batch");
  Step norm{"batch_norm_train", {}, {}, {{"epsilon", 1e-3}}, "m.cpp:5"};
  decodeAttributes(norm);
  EXPECT_FALSE(attrsOf<NormReluAttrs>(norm).relu);
  EXPECT_EQ(normEpsilon(norm), 1e-3);
  EXPECT_NE(spmd::testing::errorOf([&] { attrsOf<AllReduceAttrs>(conv); }).find("carries another op's attribute record"),
            std::string::npos);
  Step raw = conv;
  raw.record = nullptr;
  EXPECT_NE(spmd::testing::errorOf([&] { convAttrs(raw); }).find("before its attributes were decoded"),
            std::string::npos);
  auto errorDecoding = [](Step step) { return spmd::testing::errorOf([&] { decodeAttributes(step); }); };
  Step unknown = reduce;
  unknown.attrs["reduction"] = std::string("avg");
  EXPECT_NE(errorDecoding(unknown).find("step 'all_reduce' (m.cpp:4): attribute 'reduction': unknown reduction 'avg'"),
            std::string::npos) << errorDecoding(unknown);
  // A reduction the kind spells but the op does not take: refused before a kernel could read it.
  Step scatterSum{"scatter_reduce", {}, {}, {{"axis", int64_t{1}}, {"reduction", std::string("sum")}}, "m.cpp:8"};
  EXPECT_NE(errorDecoding(scatterSum)
                .find("step 'scatter_reduce' (m.cpp:8): attribute 'reduction' is sum; this op takes max or min"),
            std::string::npos)
      << errorDecoding(scatterSum);
  scatterSum.attrs["reduction"] = std::string("min");
  decodeAttributes(scatterSum);
  EXPECT_EQ(attrsOf<ScatterReduceAttrs>(scatterSum).reduction, Reduction::Min);
  Step windowMin{"reduce_window", {}, {}, {{"reduction", std::string("min")}, {"window", std::vector<int64_t>{2, 2}},
                 {"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{0, 0}},
                 {"dilation", std::vector<int64_t>{1, 1}}, {"count_include_pad", false}}, "m.cpp:9"};
  EXPECT_NE(errorDecoding(windowMin).find("attribute 'reduction' is min; this op takes max, sum or mean"),
            std::string::npos)
      << errorDecoding(windowMin);
  Step missing = conv;
  missing.attrs.erase("padding");
  EXPECT_NE(errorDecoding(missing).find("step 'conv2d' (m.cpp:3) has no attribute 'padding'"), std::string::npos);
  Step mistyped = conv;
  mistyped.attrs["stride"] = int64_t{2};
  EXPECT_NE(errorDecoding(mistyped).find("attribute 'stride' is not a list of integers"), std::string::npos);
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
  EXPECT_EQ(ir::differentiation("conv2d_backward_data"), ir::Differentiation::Vjp);  // convTranspose2d
  EXPECT_EQ(ir::differentiation("conv2d_backward_filter"), ir::Differentiation::FirstOrderOnly);
  EXPECT_EQ(ir::differentiation("no_such_op"), ir::Differentiation::None);
}

}  // namespace
}  // namespace spmd
