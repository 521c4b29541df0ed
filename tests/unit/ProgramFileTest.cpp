// Saved Programs: a compiled ResNet-18 training step written by the pipeline (program.spmd in the
// dump directory) loads back to the same Program, runs to the same bits as the step it came
// from, runs in the runtime-only tool spmd-run (no MLIR linked), and damaged files give clear
// errors naming the file. The DOT view the pipeline writes beside the dumps renders with
// Graphviz's dot, one node per step, input and output.
#include <algorithm>
#include <regex>
#include <unistd.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <zlib.h>

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/ProgramCheck.h"
#include "runtime/program/ProgramFile.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/exec/ReplicaGroup.h"
#include "frontend/models/ResNet.h"

namespace spmd {
namespace {

namespace fs = std::filesystem;

class ProgramFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test and process: ctest runs this suite's tests in parallel.
    dir_ = fs::temp_directory_path() /
           ("spmd_program_file_test-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  // A width-4 ResNet-18 SGD step's model, inputs and optimizer (for jit(bench::trainStep(...))).
  std::unique_ptr<nn::Module> model = models::resnet18({.width = 4});
  std::pair<Tree, Tree> initial = model->initialize(2);
  Tree& params = initial.first;
  Tree& state = initial.second;
  optim::Sgd sgd{{.learningRate = 0.05, .momentum = 0.9}};
  Tree opt = sgd.init(params);
  std::pair<Tensor, Tensor> batch = bench::syntheticBatch(4);
  Tensor& x = batch.first;
  Tensor& y = batch.second;
};

std::string errorOf(const std::string& path) {
  try {
    runtime::loadProgram(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(ProgramFileTest, TrainStepDotRendersWithGraphviz) {
  if (testing::runCommand("command -v dot").status != 0) {
    if (std::getenv("CI")) FAIL() << "Graphviz's dot is missing; scripts/setup.sh installs graphviz";
    GTEST_SKIP() << "Graphviz's dot is not installed (apt-get install graphviz)";
  }
  auto step = jit(bench::trainStep(*model, sgd), {.dumpDir = dir_.string()});
  step(params, opt, state, x, y);
  const fs::path dot = fs::path(step.lastDumpDir()) / "program.dot", svg = dir_ / "step.svg";
  ASSERT_TRUE(fs::exists(dot));
  const runtime::Program& program = step.lastProgram();
  std::ifstream in(dot);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("conv2d\\nstage1.0.conv1"), std::string::npos) << "steps are labelled with op and layer";
  auto run = testing::runCommand("dot -Tsvg " + dot.string() + " -o " + svg.string());
  ASSERT_EQ(run.status, 0) << run.output;
  std::ifstream drawn(svg);
  std::string image((std::istreambuf_iterator<char>(drawn)), std::istreambuf_iterator<char>());
  size_t nodes = 0;
  for (size_t at = image.find("class=\"node\""); at != std::string::npos; at = image.find("class=\"node\"", at + 1)) ++nodes;
  EXPECT_EQ(nodes, program.steps.size() + program.inputs.size() + program.outputs.size());
}

TEST_F(ProgramFileTest, SavedTrainStepLoadsRunsAndRunsInSpmdRun) {
  auto step = jit(bench::trainStep(*model, sgd), {.dumpDir = dir_.string()});
  auto [p1, o1, s1, loss] = step(params, opt, state, x, y);
  const std::filesystem::path dumps = step.lastDumpDir();
  EXPECT_EQ(dumps.parent_path(), dir_) << "each compiled function dumps into its own subdirectory";

  const runtime::Program& original = step.lastProgram();
  runtime::Program loaded = runtime::loadProgram((dumps / "program.spmd").string());
  EXPECT_EQ(loaded.toText(), original.toText());
  ASSERT_EQ(loaded.buffers.size(), original.buffers.size());
  for (size_t i = 0; i < loaded.buffers.size(); ++i) EXPECT_EQ(loaded.buffers[i].constant, original.buffers[i].constant);

  // Run the loaded program on the step's inputs (leaves in argument order): the same loss bits.
  std::vector<Array> inputs;
  for (const Tree* tree : {&params, &opt, &state})
    for (const auto& [_, t] : *tree) inputs.push_back(t.array());
  inputs.push_back(x.array());
  inputs.push_back(y.array());
  runtime::Executor executor(loaded, std::make_shared<runtime::CpuDevice>());
  std::vector<Array> outputs = executor.run(inputs);
  testing::expectSameBits(outputs.back(), loss.array(), "loss");
  // The CPU backend's blocked layouts travel in the file; a backend without them refuses it.
  if (runtime::CpuDevice().channelBlock() != 0) {
    EXPECT_NE(loaded.toText().find(" nChw"), std::string::npos) << "no blocked buffer in the train step";
    std::string refused = testing::errorOf([&] {
      runtime::Executor sim(loaded, runtime::makeDevice(runtime::parseDeviceList("sim"), 0));
    });
    EXPECT_NE(refused.find("which device sim:0 does not read: compile the program for this device"), std::string::npos)
        << refused;
  }

  auto run = testing::runCommand(testing::spmdRunPath() + " " + (dumps / "program.spmd").string() +
                                 " --devices cpu:1 --steps 2 --warmup 1 --items 4 --kernels");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("ms per run over 2 runs"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("items/s"), std::string::npos) << run.output;
  // --kernels: each convolution step's variant and why (on plain layouts oneDNN's direct and
  // sliced kernels are timed; on blocked 3x3 ones Winograd's paths too; or a choice is remembered).
  EXPECT_TRUE(std::regex_search(run.output, std::regex("step 0 conv2d \\(stem.conv, benchmarks/TrainStep.h:[0-9]+\\): "
                                                       "onednn(_sliced)?: (the fastest of 2 timed|chosen before)")))
      << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(" conv2d_backward_filter \\(stage4[^)]*\\): [a-z_]+: "
                                                       "(the fastest of [0-9] timed|chosen before)")))
      << run.output;
  auto bad = testing::runCommand(testing::spmdRunPath() + " " + (dumps / "program.spmd").string() + " --steps 0");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--steps is 0, out of range: give a whole number from 1 to 2147483647"), std::string::npos)
      << bad.output;
  // Past int's range: refused, not wrapped into a negative or zero number of runs.
  for (const char* steps : {"4294967296", "2147483648"}) {
    auto huge = testing::runCommand(testing::spmdRunPath() + " " + (dumps / "program.spmd").string() + " --steps " + steps);
    EXPECT_EQ(huge.status, 2) << huge.output;
    EXPECT_NE(huge.output.find(std::string("--steps is ") + steps + ", out of range"), std::string::npos) << huge.output;
  }
}

// A pmapped Program keeps its axis and replica count through a file, and refuses to run on
// another count (its pmean divides by the count it was traced for), in the runtime and in
// spmd-run, saying both numbers; sim:2 and cpu:2 run it.
TEST_F(ProgramFileTest, AProgramKeepsItsReplicaCountAndRefusesAnother) {
  auto f = pmap([](const Tensor& a) { return pmean(a, "batch"); },
                {.devices = "cpu:2", .dumpDir = dir_.string()});
  f(Tensor(testing::randomArray(DType::f32, {2, 3}, 1)));
  const std::string path = (std::filesystem::path(f.lastDumpDir()) / "program.spmd").string();
  runtime::Program loaded = runtime::loadProgram(path);
  EXPECT_EQ(loaded.axisName, "batch");
  EXPECT_EQ(loaded.replicas, 2);
  EXPECT_NE(loaded.toText().find("axis 'batch' of 2 replicas"), std::string::npos) << loaded.toText();
  const std::string expected =
      "program @main was compiled for 2 replicas (axis 'batch') but device list 'cpu:4' has 4; its collectives "
      "and pmean divisors assume 2, so run it on 2 devices or compile it again for 4";
  try {
    runtime::ReplicaGroup group(loaded, runtime::parseDeviceList("cpu:4"), runtime::Job::single(), std::chrono::seconds(5));
    ADD_FAILURE() << "a 2-replica program ran on cpu:4";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
  auto wrong = testing::runCommand(testing::spmdRunPath() + " " + path + " --devices cpu:4 --steps 1");
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.output.find(expected), std::string::npos) << wrong.output;
  for (const char* devices : {"cpu:2", "sim:2"}) {
    auto right = testing::runCommand(testing::spmdRunPath() + " " + path + " --devices " + devices + " --steps 1");
    EXPECT_EQ(right.status, 0) << right.output;
  }
}

// `bytes` (a Program file) with its checksum made right again, as a writer that changed the
// file on purpose would: what the checks behind the checksum see.
std::string resealed(std::string bytes) {
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size() - 16));
  uint64_t sum = crc;
  std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
  return bytes;
}

// `bytes` with its JSON header changed by `edit` (the length updated) and resealed.
template <typename Edit>
std::string withHeader(const std::string& bytes, Edit edit) {
  uint64_t length = 0;
  std::memcpy(&length, bytes.data() + 8, 8);
  std::string header = bytes.substr(16, length);
  edit(header);
  uint64_t newLength = header.size();
  std::string out = bytes.substr(0, 8) + std::string(reinterpret_cast<const char*>(&newLength), 8) + header +
                    bytes.substr(16 + length);
  return resealed(out);
}

TEST_F(ProgramFileTest, DamagedFilesAreClearErrors) {
  auto f = jit([](const Tensor& a) { return relu(mul(a, fill(a, 3.0))); }, {.dumpDir = dir_.string()});
  f(Tensor(testing::randomArray(DType::f32, {4, 3}, 1)));
  std::string good = (std::filesystem::path(f.lastDumpDir()) / "program.spmd").string(), bad = (dir_ / "bad.spmd").string();
  std::string bytes = testing::readBytes(good);
  EXPECT_EQ(errorOf(good), "no error");
  auto write = [&](const std::string& contents) { std::ofstream(bad, std::ios::binary | std::ios::trunc) << contents; };

  write(bytes.substr(0, 10));
  EXPECT_NE(errorOf(bad).find(bad + ": not a valid spmd program: it does not start with SPMDPROG"), std::string::npos)
      << errorOf(bad);
  write(bytes.substr(0, 40));
  EXPECT_NE(errorOf(bad).find("it does not end with a checksum (truncated, or written by an older spmd release: "
                              "recompile it)"), std::string::npos) << errorOf(bad);
  // Any byte changed after the file was written: refused by its checksum, naming why.
  std::string json = bytes;
  json[20] = '#';
  write(json);
  EXPECT_NE(errorOf(bad).find("its content does not match its checksum: it was changed or damaged after it was "
                              "written; recompile it or copy it again"), std::string::npos) << errorOf(bad);
  // The same changes with the checksum made right again reach the checks behind it.
  write(resealed(json));
  EXPECT_NE(errorOf(bad).find("bad header"), std::string::npos) << errorOf(bad);
  std::string edited = bytes;
  size_t at = edited.find("\"inputs\": [\n  0");
  ASSERT_NE(at, std::string::npos) << bytes.substr(16, 400);
  edited[at + 14] = '7';
  write(resealed(edited));
  EXPECT_NE(errorOf(bad).find("inputs names buffer 7 of"), std::string::npos) << errorOf(bad);
  edited = bytes;
  at = edited.find("\"version\": 5");
  edited[at + 11] = '9';
  write(resealed(edited));
  EXPECT_NE(errorOf(bad).find("version 9 is not 5"), std::string::npos) << errorOf(bad);
  // A dimension whose element count overflows: refused before anything is allocated.
  write(withHeader(bytes, [](std::string& header) {
    size_t shape = header.find("\"shape\": [");
    size_t digit = header.find_first_of("0123456789", shape);
    header.replace(digit, header.find_first_not_of("0123456789", digit) - digit, "4611686018427387904");
  }));
  EXPECT_NE(errorOf(bad).find("has more than 2^40 elements; no buffer is that large"), std::string::npos)
      << errorOf(bad);
  // A step that reads a buffer no earlier step wrote.
  write(withHeader(bytes, [](std::string& header) {
    size_t steps = header.find("\"steps\"");
    size_t inputs = header.find("\"inputs\": [", steps);
    size_t digit = header.find_first_of("0123456789", inputs);
    header.replace(digit, header.find_first_not_of("0123456789", digit) - digit, "1");  // its own result
  }));
  EXPECT_NE(errorOf(bad).find("reads buffer %1 (f32[4, 3]) before any step writes it"), std::string::npos)
      << errorOf(bad);
  // Layouts: an unknown one, and a blocked one on a tensor it cannot hold.
  runtime::Program tiny;
  tiny.name = "tiny";
  tiny.buffers.push_back({DType::f32, {2, 16, 3, 3}, {}});
  tiny.inputs = tiny.outputs = {0};
  tiny.buffers[0].layout = "nChw4c";
  runtime::saveProgram(tiny, bad);
  EXPECT_NE(errorOf(bad).find("unknown tensor layout 'nChw4c' (known: plain, nChw8c, nChw16c, nhwc)"), std::string::npos)
      << errorOf(bad);
  tiny.buffers[0] = {DType::f32, {2, 12, 3, 3}, {}};
  tiny.buffers[0].layout = "nChw8c";
  runtime::saveProgram(tiny, bad);
  EXPECT_NE(errorOf(bad).find("buffer 0 has layout nChw8c but shape [2, 12, 3, 3]"), std::string::npos)
      << errorOf(bad);
  EXPECT_NE(errorOf((dir_ / "missing.spmd").string()).find("cannot open program"), std::string::npos);
  // A directory (its "size" once ended as std::bad_alloc) and a device are named as such.
  EXPECT_NE(errorOf(dir_.string()).find(dir_.string() + ": is a directory, not a program file; SPMD_DUMP_IR=<dir> "
                                        "writes <dir>/program.spmd"),
            std::string::npos)
      << errorOf(dir_.string());
  EXPECT_NE(errorOf("/dev/null").find("/dev/null: is not a regular file"), std::string::npos) << errorOf("/dev/null");
}

// Steps against the Program contract's catalog (runtime/program/Catalog.h): an op it lacks, and
// attributes missing, of another kind, foreign to the op, or naming no reduction.
TEST_F(ProgramFileTest, StepsOutsideTheCatalogAreClearErrors) {
  auto errorOfStep = [](const std::string& op, std::map<std::string, runtime::Attr> attrs) {
    runtime::Program p;
    p.name = "steps";
    p.axisName = "batch";
    p.replicas = 2;
    p.buffers = {{DType::f32, {2, 3, 4, 4}, {}}, {DType::f32, {2, 3, 4, 4}, {}}};
    p.inputs = {0};
    p.outputs = {1};
    p.steps = {{op, {0}, {1}, std::move(attrs), "model.cpp:3"}};
    try {
      runtime::checkProgram(p);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  using V = std::vector<int64_t>;
  const std::string at = "program @steps: step 0 ";
  EXPECT_EQ(errorOfStep("relu", {}), "no error");
  EXPECT_EQ(errorOfStep("conv3d", {}), at + "'conv3d' (model.cpp:3): no such op in this spmd's catalog "
                                            "(runtime/program/Catalog.h); was the program written by another "
                                            "version of spmd? compile it again");
  std::map<std::string, runtime::Attr> window = {{"reduction", std::string("max")}, {"window", V{1, 1}},
                                                 {"stride", V{1, 1}}, {"padding", V{0, 0}},
                                                 {"dilation", V{1, 1}}, {"count_include_pad", true}};
  EXPECT_EQ(errorOfStep("reduce_window", window), "no error");
  auto without = window;
  without.erase("dilation");
  EXPECT_EQ(errorOfStep("reduce_window", without),
            at + "'reduce_window' (model.cpp:3) has no attribute 'dilation' (a list of integers)");
  auto mistyped = window;
  mistyped["stride"] = int64_t{1};
  EXPECT_EQ(errorOfStep("reduce_window", mistyped),
            at + "'reduce_window' (model.cpp:3): attribute 'stride' is an integer, not a list of integers");
  auto foreign = window;
  foreign["axis"] = int64_t{1};
  EXPECT_EQ(errorOfStep("reduce_window", foreign),
            at + "'reduce_window' (model.cpp:3) has an attribute 'axis' that op reduce_window does not take");
  auto prod = window;
  prod["reduction"] = std::string("prod");
  EXPECT_EQ(errorOfStep("reduce_window", prod),
            at + "'reduce_window' (model.cpp:3): unknown reduction 'prod'; expected sum, mean, max or min");
  // An optional flag may be absent (matmul's transposes), but not of another kind.
  EXPECT_EQ(errorOfStep("matmul", {}), "no error");
  EXPECT_EQ(errorOfStep("matmul", {{"transpose_lhs", int64_t{1}}}),
            at + "'matmul' (model.cpp:3): attribute 'transpose_lhs' is an integer, not a boolean");
}

// The user's report: "replicas" edited from 2 to 8 crashed on cpu:8 and 4 gave wrong numbers.
// Edited by hand the file fails its checksum; edited with the checksum made right, the
// collectives' shapes give the replica count away.
TEST_F(ProgramFileTest, AnEditedReplicaCountIsRefused) {
  auto f = pmap([](const Tensor& a) { return std::tuple{allGather(a, "batch"), pmean(a, "batch")}; },
                {.devices = "cpu:2", .dumpDir = dir_.string()});
  f(Tensor(testing::randomArray(DType::f32, {2, 3}, 1)));
  std::string bytes = testing::readBytes((std::filesystem::path(f.lastDumpDir()) / "program.spmd").string());
  std::string bad = (dir_ / "replicas.spmd").string();
  auto write = [&](const std::string& contents) { std::ofstream(bad, std::ios::binary | std::ios::trunc) << contents; };
  std::string edited = bytes;
  size_t at = edited.find("\"replicas\": 2");
  ASSERT_NE(at, std::string::npos);
  edited[at + 12] = '8';
  write(edited);
  EXPECT_NE(errorOf(bad).find("does not match its checksum"), std::string::npos) << errorOf(bad);
  write(resealed(edited));
  EXPECT_NE(errorOf(bad).find("'all_gather'"), std::string::npos) << errorOf(bad);
  EXPECT_NE(errorOf(bad).find("is not 8 (the program's replicas) times buffer"), std::string::npos) << errorOf(bad);
}

// The call contract (runtime::Program's placements and donation pairs) is filled by the lowering,
// shown in the text form, saved, and checked at load: an edited one is refused naming the entry.
TEST_F(ProgramFileTest, TheCallContractIsSavedAndEditsAreRefused) {
  auto f = pmap([](const Tensor& w, const Tensor& x) { return std::tuple{sub(w, pmean(mean(x, {0}), "batch")), relu(x)}; },
                {.inAxes = {replicated, 0}, .outAxes = {replicated, 0}, .devices = "cpu:2", .dumpDir = dir_.string(),
                 .donateArguments = {0}});
  f(Tensor(testing::randomArray(DType::f32, {3}, 1)), Tensor(testing::randomArray(DType::f32, {2, 4, 3}, 2)));
  const std::string path = (std::filesystem::path(f.lastDumpDir()) / "program.spmd").string();
  runtime::Program loaded = runtime::loadProgram(path);
  using Kind = runtime::Placement::Kind;
  ASSERT_EQ(loaded.inputPlacements.size(), 2u);
  EXPECT_EQ(loaded.inputPlacements[0].kind, Kind::Replicated);
  EXPECT_EQ(loaded.inputPlacements[1].kind, Kind::Mapped);
  ASSERT_EQ(loaded.outputPlacements.size(), 2u);
  EXPECT_EQ(loaded.outputPlacements[0].kind, Kind::Replicated);
  EXPECT_EQ(loaded.outputPlacements[1].kind, Kind::Mapped);
  EXPECT_EQ(loaded.outputDonors, (std::vector<int>{0, -1}));
  const std::string text = loaded.toText();
  EXPECT_NE(text.find("  input 1 %1 mapped\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" replicated, takes input 0's buffers when donated\n"), std::string::npos) << text;

  // spmd-run calls it as the contract says: w the same on both replicas (else the replicated
  // output, w less a mean over both, would differ between them), x split, w updated in place.
  auto run = testing::runCommand(testing::spmdRunPath() + " " + path + " --devices cpu:2 --steps 3");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("; 1 of 2 inputs updated in place (donated outputs)\n1 replicated outputs hold the same bits "
                            "on every replica"), std::string::npos) << run.output;

  std::string bytes = testing::readBytes(path), bad = (dir_ / "contract.spmd").string();
  auto refused = [&](const std::string& from, const std::string& to) {
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << withHeader(bytes, [&](std::string& header) {
      size_t at = header.find(from);
      ASSERT_NE(at, std::string::npos) << from << " in " << header;
      header.replace(at, from.size(), to);
    });
    return errorOf(bad);
  };
  EXPECT_NE(refused("\"output_donors\": [\n  0,", "\"output_donors\": [\n  1,")
                .find("output 0 buffer %4 (f32[3]) (replicated) takes the buffers of input 1 buffer %1 (f32[4, 3]) "
                      "(mapped); they need the same dtype, shape and placement"),
            std::string::npos)
      << errorOf(bad);
  EXPECT_NE(refused("\"output_donors\": [\n  0,", "\"output_donors\": [\n  0,\n  0,")
                .find("the call contract has 2 input placements, 2 output placements and 3 output donors for 2 inputs "
                      "and 2 outputs"),
            std::string::npos)
      << errorOf(bad);
  EXPECT_NE(refused("\"kind\": \"mapped\"", "\"kind\": \"sharded\"").find("placement 'sharded' is not replicated, mapped, sliced or mesh"),
            std::string::npos)
      << errorOf(bad);
  EXPECT_NE(refused("\"kind\": \"mapped\"", "\"kind\": \"sliced\", \"full\": [7]")
                .find("input 1 buffer %1 (f32[4, 3]) is a slice of [7] over 2 replicas, which is [4] elements"),
            std::string::npos)
      << errorOf(bad);
  // A contract that passes the checks but lies (the mapped relu(x) claimed replicated) is caught
  // by spmd-run's agreement check: the replicas' values differ.
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << withHeader(bytes, [&](std::string& header) {
    size_t at = header.find("\"kind\": \"mapped\"", header.find("\"output_placements\""));
    ASSERT_NE(at, std::string::npos) << header;
    header.replace(at, 16, "\"kind\": \"replicated\"");
  });
  EXPECT_EQ(errorOf(bad), "no error");
  auto lying = testing::runCommand(testing::spmdRunPath() + " " + bad + " --devices cpu:2 --steps 1");
  EXPECT_EQ(lying.status, 1) << lying.output;
  EXPECT_NE(lying.output.find("replicated output 1 (f32[4, 3] on cpu:0, cpu:1 (replicated)) differs between replica 0 "
                              "and replica 1 after the last step"),
            std::string::npos)
      << lying.output;
}

// A shardMap-ped function's contract: each argument and result on the mesh by its spec, the mesh
// with the program; saved, loaded and run by spmd-run from whole values; edits that name an axis
// the mesh lacks, or drop the mesh, are refused naming them.
TEST_F(ProgramFileTest, AMeshContractIsSavedAndRunAndEditsAreRefused) {
  auto f = shardMap([](const Tensor& w, const Tensor& x) { return std::tuple{w * 2.0, psum(x, "data")}; },
                    Mesh({{"data", 2}, {"model", 2}}),
                    {.inSpecs = {{"", "model"}, {"data"}}, .outSpecs = {{"", "model"}, {}},
                     .pmap = {.axisName = "mesh", .devices = "cpu:4", .dumpDir = dir_.string()}});
  auto [w, x] = f(Tensor(testing::randomArray(DType::f32, {3, 4}, 1)), Tensor(testing::randomArray(DType::f32, {4, 5}, 2)));
  EXPECT_EQ(w.shape(), (Shape{3, 4}));
  const std::string path = (std::filesystem::path(f.lastDumpDir()) / "program.spmd").string();
  runtime::Program loaded = runtime::loadProgram(path);
  using Kind = runtime::Placement::Kind;
  EXPECT_EQ(loaded.mesh.describe(), "{data: 2, model: 2}");
  ASSERT_EQ(loaded.inputPlacements.size(), 2u);
  EXPECT_EQ(loaded.inputPlacements[0], (runtime::Placement{Kind::Mesh, {}, {"", "model"}}));
  EXPECT_EQ(loaded.inputPlacements[1], (runtime::Placement{Kind::Mesh, {}, {"data"}}));
  EXPECT_EQ(loaded.outputPlacements[1], (runtime::Placement{Kind::Mesh, {}, {}}));
  EXPECT_EQ(loaded.buffers[size_t(loaded.inputs[0])].shape, (Shape{3, 2}));  // one replica's block
  const std::string text = loaded.toText();
  EXPECT_NE(text.find("  input 1 %1 mesh {\"data\"} on {data: 2, model: 2}\n"), std::string::npos) << text;

  auto run = testing::runCommand(testing::spmdRunPath() + " " + path + " --devices cpu:4 --steps 2");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("2 mesh outputs put together on {data: 2, model: 2}: their copies agree"), std::string::npos)
      << run.output;

  std::string bytes = testing::readBytes(path), bad = (dir_ / "mesh.spmd").string();
  auto refused = [&](const std::string& from, const std::string& to) {
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << withHeader(bytes, [&](std::string& header) {
      size_t at = header.find(from);
      ASSERT_NE(at, std::string::npos) << from << " in " << header;
      header.replace(at, from.size(), to);
    });
    return errorOf(bad);
  };
  EXPECT_NE(refused("\"spec\": [\n    \"data\"", "\"spec\": [\n    \"rows\"").find("is split by {\"rows\"} over axis 'rows', which mesh "
                                                             "{data: 2, model: 2} does not have"),
            std::string::npos)
      << errorOf(bad);
  EXPECT_NE(refused("\"mesh\": {", "\"unused\": {").find("lies on a mesh, but the program's mesh {} is not one of its 4 replicas"),
            std::string::npos)
      << errorOf(bad);
  // psum over "data" is the mapped axis' all_reduce within the data axis' groups; an edited
  // group is refused before anything runs.
  auto grouped = std::find_if(loaded.steps.begin(), loaded.steps.end(), [](const runtime::Step& step) {
    return step.op == "all_reduce" && step.attrs.count("replica_groups");
  });
  ASSERT_NE(grouped, loaded.steps.end()) << text;
  EXPECT_EQ(std::get<std::vector<int64_t>>(grouped->attrs.at("replica_groups")), (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(std::get<int64_t>(grouped->attrs.at("group_size")), 2);
  grouped->attrs["replica_groups"] = std::vector<int64_t>{0, 2, 2, 3};
  try {
    runtime::checkProgram(loaded);
    ADD_FAILURE() << "a replica in two groups was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replica_groups names replica 2, outside the program's 4 replicas or a second time"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace spmd
