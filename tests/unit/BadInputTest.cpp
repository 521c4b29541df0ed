// Bad input gets a clear spmd::Error naming what is wrong and where, never a crash: wrong input
// shape, rank or dtype to a traced function, retracing on a new signature, ops outside a trace,
// wrong inputs to an Executor, runtime failures inside a step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "TestUtil.h"

#include "frontend/spmd.h"
#include "runtime/exec/Executor.h"
#include "runtime/cpu/CpuDevice.h"
#include "frontend/models/ResNet.h"

namespace spmd {
namespace {

// Runs fn, expects spmd::Error, and checks the message contains every needle.
template <typename Fn>
void expectError(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message << "\nmissing: " << needle;
  }
}

class BadInputTest : public ::testing::Test {
 protected:
  std::unique_ptr<nn::Sequential> model = models::resnet18({.width = 4});
  std::pair<Tree, Tree> vars = model->initialize(0);
  int line = 0;
  // The apply() call below is the user's line errors must name.
  Jitted<std::function<Tensor(const Tree&, const Tree&, const Tensor&)>> forward = jit(
      std::function<Tensor(const Tree&, const Tree&, const Tensor&)>(
          [this](const Tree& p, const Tree& s, const Tensor& x) {
            line = __LINE__ + 1;
            return model->apply(p, s, x, true).first;
          }));
  Tensor images(Shape shape, DType dtype = DType::f32) { return Array::zeros(dtype, std::move(shape)); }
  std::string here() { return "tests/unit/BadInputTest.cpp:" + std::to_string(line); }
};

TEST_F(BadInputTest, WrongChannelCountNamesTheUserLine) {
  expectError([&] { forward(vars.first, vars.second, images({2, 3, 28, 28})); },
              {"BadInputTest.cpp:", "in layer 'stem.conv': spmd.conv2d: input tensor<2x3x28x28xf32> has 3 channels "
               "but filter tensor<4x1x3x3xf32> expects 1"});
  EXPECT_NE(line, 0);
}

TEST_F(BadInputTest, WrongRankAndDtype) {
  expectError([&] { forward(vars.first, vars.second, images({2, 28, 28})); },
              {"spmd.conv2d: input (N, C, H, W) must have rank 4, got tensor<2x28x28xf32>"});
  expectError([&] { forward(vars.first, vars.second, images({2, 1, 28, 28}, DType::f64)); },
              {"filter (O, I, KH, KW) has element type f32 but must match f64"});
}

TEST_F(BadInputTest, ErrorLineIsTheCallersLine) {
  try {
    forward(vars.first, vars.second, images({2, 3, 28, 28}));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(here()), std::string::npos) << e.what();
  }
}

TEST_F(BadInputTest, NewSignatureRetracesAndSaysWhy) {
  Tensor a = forward(vars.first, vars.second, images({2, 1, 28, 28}));
  EXPECT_EQ(forward.compileCount(), 1);
  EXPECT_EQ(forward.lastCompileReason(), "first call");
  forward(vars.first, vars.second, images({2, 1, 28, 28}));
  EXPECT_EQ(forward.compileCount(), 1) << "same signature must hit the cache";
  Tensor b = forward(vars.first, vars.second, images({5, 1, 28, 28}));
  EXPECT_EQ(forward.compileCount(), 2);
  EXPECT_NE(forward.lastCompileReason().find("argument 2 was f32[2, 1, 28, 28], now f32[5, 1, 28, 28]"), std::string::npos)
      << forward.lastCompileReason();
  EXPECT_EQ(a.shape(), (Shape{2, 10}));
  EXPECT_EQ(b.shape(), (Shape{5, 10}));
  Tree fewer;
  for (const auto& [k, v] : vars.first)
    if (k != "fc.bias") fewer.set(k, v);
  // The user's apply() line, not the layer's inside the library; an empty tree says so.
  expectError([&] { forward(fewer, vars.second, images({2, 1, 28, 28})); }, {here() + ": tree has no entry 'fc.bias'"});
  expectError([&] { forward(vars.first, Tree(), images({2, 1, 28, 28})); },
              {here() + ": tree has no entry 'stem.bn.running_mean' (it is empty)"});
  // A parameter of the wrong shape is named by the check of its own: the filter against the
  // input's channels, before the bias against the filter's outputs.
  Tree wrong = vars.first;
  wrong.set("stage2.0.conv1.weight", Array::zeros(DType::f32, {3, 3, 3, 3}));
  expectError([&] { forward(wrong, vars.second, images({2, 1, 28, 28})); },
              {here(), "in layer 'stage2.0.conv1': spmd.conv2d: input tensor<2x4x28x28xf32> has 4 channels but filter "
                       "tensor<3x3x3x3xf32> expects 3"});
}

TEST(BadInput, GradientOfNonScalarOrIntegerIsAnErrorAtTheUserLine) {
  Array x = Array::of<float>({3}, std::vector<float>{1, 2, 3});
  const int line = __LINE__ + 4;  // the grad(...)(t) call below
  expectError(
      [&] {
        jit([&](const Tensor& t) {
          return grad([](const Tensor& u) { return exp(u); })(t);
        })(x);
      },
      {"BadInputTest.cpp:" + std::to_string(line) + ":", "the loss must be a scalar float tensor",
       "got f32[3]", "spmd::mean"});
  Tree params;
  params.set("w", x);
  params.set("count", Array::of<int32_t>({1}, std::vector<int32_t>{4}));
  expectError(
      [&] {
        jit([&](const Tree& p) {
          return grad([](const Tree& q) { return sum(q.at("w"), {0}); })(p);
        })(params);
      },
      {"cannot differentiate with respect to 'count'", "i32[1] (integer)", "Capture integer data"});
}

TEST(BadInput, OpOutsideTraceSaysHowToFix) {
  Tensor x = Array::zeros(DType::f32, {3});
  expectError([&] { relu(x); }, {"BadInputTest.cpp:", "spmd::relu was called outside a traced function", "spmd::jit"});
  // A collective needs pmap's axis: jit would not help.
  expectError([&] { pmean(x, "batch"); },
              {"BadInputTest.cpp:", "spmd::pmean was called outside a traced function; call it inside a function "
               "passed to spmd::pmap (collectives need its mapped axis)"});
}

// Errors about a jitted function call it jit, not pmap.
TEST(BadInput, JitErrorsNameJit) {
  auto f = jit([](const Tensor& x) { return x; }, {.name = "forward"});
  Tensor undefined;
  expectError([&] { f(undefined); }, {"jit 'forward': argument 0 is an undefined tensor"});
}

// Mapped inputs of different batch sizes: said at the call, with their sizes, before the shape
// error they cause deep inside the step.
TEST(BadInput, MappedInputsOfDifferentSizesAreNamedAtTheCall) {
  auto step = pmap([](const Tensor& logits, const Tensor& labels) { return mean(softmaxCrossEntropy(logits, labels), {0}); },
                   {.inAxes = {split, split}, .devices = "cpu:2"});
  expectError([&] { step(Array::zeros(DType::f32, {8, 10}), Array::zeros(DType::i32, {6})); },
              {"spmd::pmap 'main': the mapped inputs have different rows per replica (argument 0 4, argument 1 3); "
               "give them the same batch size. Tracing the step then failed: ", "softmax_cross_entropy"});
}

// The same device-resident tensor passed twice, one of them donated: refused before running,
// with the tensor still usable.
TEST(BadInput, ADonatedTensorPassedTwiceIsRefusedBeforeRunning) {
  auto place = pmap([](const Tensor& x) { return x; }, {.inAxes = {replicated}, .devices = "cpu:2"});
  auto sum = [](const Tensor& a, const Tensor& b) { return add(a, b); };
  auto f = pmap(sum, {.inAxes = {replicated, replicated}, .devices = "cpu:2", .donateArguments = {0, 1}});
  auto g = pmap(sum, {.inAxes = {replicated, replicated}, .devices = "cpu:2", .donateArguments = {1}});
  Tensor x = place(Array::of<float>({2}, std::vector<float>{1, 2}));
  for (auto* h : {&f, &g})
    expectError([&] { (*h)(x, x); },
                {"spmd::pmap 'main': argument 0 and argument 1 are the same device-resident tensor, and argument ",
                 "is donated (donateArguments): its buffers would be overwritten while the other still reads them; "
                 "pass a copy, or donate neither"});
  EXPECT_EQ(x.array().values<float>()[1], 2.0f) << "the refused call left the input intact";
  Tensor twice = f(x, place(Array::of<float>({2}, std::vector<float>{1, 2})));
  EXPECT_EQ(twice.array().values<float>()[1], 4.0f);
}

// An IR dump directory that cannot be created names the variable that asked for it.
TEST(BadInput, AnUnusableDumpDirectoryNamesItsVariable) {
  auto file = std::filesystem::temp_directory_path() / ("spmd_dump_is_a_file_" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  ::setenv("SPMD_DUMP_IR", (file / "sub").c_str(), 1);
  auto f = jit([](const Tensor& x) { return relu(x); });
  std::string message = testing::errorOf([&] { f(Array::zeros(DType::f32, {3})); });
  ::unsetenv("SPMD_DUMP_IR");
  std::filesystem::remove(file);
  EXPECT_NE(message.find("SPMD_DUMP_IR: cannot create the IR dump directory"), std::string::npos) << message;
  EXPECT_NE(message.find("point it at a writable directory, or unset it"), std::string::npos) << message;
}

// The function's name is any text; in the dump directory's path its characters other than
// letters, digits, '_' and '-' are '_', so that it names one directory inside the dump directory.
TEST(BadInput, AFunctionsNameStaysInsideTheDumpDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("spmd_dump_names_" + std::to_string(::getpid()));
  auto f = jit([](const Tensor& x) { return relu(x); }, {.name = "../up/a b", .dumpDir = dir.string()});
  f(Array::zeros(DType::f32, {3}));
  const std::filesystem::path made = f.lastDumpDir();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(made.parent_path(), dir) << made;
  EXPECT_EQ(made.filename().string().rfind("___up_a_b-", 0), 0u) << made;
}

// Options out of range are refused by name: a negative or NaN collective timeout (which waited
// for nothing), a thread count past SPMD_THREADS_PER_REPLICA's range, a negative drift-check
// interval (which checked nothing).
TEST(BadInput, PmapOptionsOutOfRangeAreNamed) {
  const Array x = Array::zeros(DType::f32, {2, 3});
  auto mean = [](const Tensor& v) { return pmean(v, "batch"); };
  expectError([&] { pmap(mean, {.devices = "cpu:2", .collectiveTimeoutSeconds = -1})(x); },
              {"spmd::pmap 'main': collectiveTimeoutSeconds is -1.000000; give the seconds a collective may wait"});
  expectError([&] { pmap(mean, {.devices = "cpu:2", .collectiveTimeoutSeconds = NAN})(x); },
              {"collectiveTimeoutSeconds is nan"});
  expectError([&] { pmap(mean, {.devices = "cpu:2", .threadsPerReplica = 100000})(x); },
              {"spmd::pmap 'main': threadsPerReplica is 100000; give a thread count from 1 to 4096"});
  expectError([&] { pmap(mean, {.devices = "cpu:2", .driftCheckEvery = -2})(x); },
              {"spmd::pmap 'main': driftCheckEvery is -2; give a number of steps between checks, or 0 for none"});
}

// A missing tree entry names the caller's line; an undefined output says it is an output; a value
// donated to a jit function names jit, not pmap.
TEST(BadInput, TreeEntriesOutputsAndDonationsAreNamedAsWritten) {
  Tree t;
  t.set("a", Array::zeros(DType::f32, {3}));
  const std::string line = "BadInputTest.cpp:" + std::to_string(__LINE__ + 1) + ": tree has no entry 'zz' (it has 1 entries: a)";
  expectError([&] { jit([](const Tree& u) { return u.at("zz") * 2.0; })(t); }, {line});
  expectError([&] { jit([](const Tensor&) { return Tensor(); })(Array::zeros(DType::f32, {3})); },
              {"BadInputTest.cpp", "output 0 of the traced function is an undefined (default-constructed) tensor"});
  auto twice = jit([](const Tensor& x) { return x * 2.0; }, {.donateArguments = {0}});
  Tensor first = twice(Array::zeros(DType::f32, {3}));
  Tensor second = twice(first);
  expectError([&] { first.array(); }, {"the value f32[3] was donated to jit 'main' and can no longer be used"});
}

TEST(BadInput, BroadcastAndReshapeErrors) {
  auto f = jit([](const Tensor& a, const Tensor& b) { return add(a, b); });
  expectError([&] { f(Tensor(Array::zeros(DType::f32, {2, 3})), Tensor(Array::zeros(DType::f32, {4}))); },
              {"spmd::add: shapes [2, 3] and [4] do not broadcast"});
  auto g = jit([](const Tensor& a) { return reshape(a, {4, -1}); });
  expectError([&] { g(Tensor(Array::zeros(DType::f32, {2, 3}))); }, {"cannot infer -1 in [4, -1]"});
  // Negative extents other than one -1 (whose product could match x's count: [-2, -3] for 6) and a
  // broadcast's are refused at the call, not by the plan's checks of a buffer f32[-1, 3].
  const Tensor six(Array::zeros(DType::f32, {2, 3}));
  expectError([&] { jit([](const Tensor& a) { return reshape(a, {-2, -3}); })(six); },
              {"BadInputTest.cpp", "spmd::reshape: shape [-2, -3] for f32[2, 3] must have non-negative extents, and at most one -1"});
  expectError([&] { jit([](const Tensor& a) { return broadcastTo(a, {-1, 3}); })(Tensor(Array::zeros(DType::f32, {1, 3}))); },
              {"BadInputTest.cpp", "spmd::broadcastTo: cannot broadcast f32[1, 3] to [-1, 3]: extent 0 is negative"});
  expectError([&] { jit([](const Tensor& a) { return broadcastTo(a, {4, 2, 4}); })(six); },
              {"BadInputTest.cpp", "spmd::broadcastTo: cannot broadcast f32[2, 3] to [4, 2, 4]: x's dim 1 is 3, which is neither 1 nor 4"});
  EXPECT_EQ(jit([](const Tensor& a) { return broadcastTo(a, {4, 2, 3}); })(six).array().shape, (Shape{4, 2, 3}));
}

// An axis out of range names the axis as written (not its value counted from 0), an axis named
// twice says so, and a convolution's groups must be positive (0 was taken for 1).
TEST(BadInput, AxesAndGroupsAreCheckedAsWritten) {
  const Tensor x(Array::zeros(DType::f32, {3, 2}));
  expectError([&] { jit([](const Tensor& a) { return sum(a, {-3}); })(x); },
              {"BadInputTest.cpp", "spmd::sum: axis -3 is outside f32[3, 2] (rank 2; negative axes count from the end)"});
  expectError([&] { jit([](const Tensor& a) { return argsort(a, -5); })(x); },
              {"spmd::argsort: axis -5 is outside f32[3, 2]"});
  expectError([&] { jit([](const Tensor& a) { return argmax(a, 2); })(x); }, {"spmd::argmax: axis 2 is outside f32[3, 2]"});
  expectError([&] { jit([](const Tensor& a) { return max(a, {0, -2}); })(x); },
              {"spmd::max: axis 0 of f32[3, 2] is named twice in the axes"});
  auto conv = jit([](const Tensor& a, const Tensor& k) { return conv2d(a, k, {}, {.groups = 0}); });
  expectError([&] { conv(Tensor(Array::zeros(DType::f32, {1, 3, 8, 8})), Tensor(Array::zeros(DType::f32, {4, 3, 3, 3}))); },
              {"BadInputTest.cpp", "groups 0 must be positive"});
}

// An array's shape: a negative extent is named (it asked std::vector for more than max_size), and
// a shape whose byte count wraps (2^32 x 2^32 floats made an array of 0 bytes) is refused.
TEST(BadInput, ArrayShapesAreCheckedBeforeAllocating) {
  const int64_t big = int64_t(1) << 32;
  expectError([&] { Array::zeros(DType::f32, {-3, 2}); }, {"an array f32[-3, 2] has the negative extent -3"});
  expectError([&] { Array::zeros(DType::f32, {big, big}); },
              {"an array f32[4294967296, 4294967296] would hold more bytes than memory can address"});
  expectError([&] { jit([](const Tensor& k) { return random::uniform(k, {-3, 2}); })(random::key(1)); },
              {"BadInputTest.cpp", "spmd::random::uniform: shape [-3, 2] has a negative extent"});
}

// Numbers that would make every value NaN or infinite are refused where they are given: an
// infinite learning rate (a NaN one was refused already), a NaN weight decay, deviation, batch-norm
// epsilon or momentum; and a layer of a negative width names the layer.
TEST(BadInput, NonFiniteSettingsAndNegativeWidthsAreRefusedWhereGiven) {
  expectError([] { optim::Adam({.learningRate = INFINITY}); }, {"optim::Adam: learningRate must be positive and finite, got inf"});
  expectError([] { optim::Sgd({.learningRate = INFINITY}); }, {"optim::Sgd: learningRate must be positive and finite"});
  const Array x = Array::zeros(DType::f32, {2, 3}), g = Array::zeros(DType::f32, {3});
  expectError([&] { jit([](const Tensor& a, const Tensor& s) { return batchNormTrain(a, s, s, NAN).y; })(x, g); },
              {"BadInputTest.cpp", "epsilon must be a positive finite float, got nan"});
  expectError([] { optim::Sgd({.weightDecay = NAN}); }, {"optim::Sgd: weightDecay must be >= 0 and finite, got nan"});
  // NaN passed the range checks written as `x < 0 || x >= 1`; an infinite epsilon made every update 0.
  expectError([] { optim::Sgd({.momentum = NAN}); }, {"optim::Sgd: momentum must be in [0, 1), got nan"});
  expectError([] { optim::Adam({.beta2 = NAN}); }, {"optim::Adam: beta2 must be in [0, 1), got nan"});
  expectError([] { optim::Adam({.epsilon = INFINITY}); }, {"optim::Adam: epsilon must be positive and finite, got inf"});
  expectError([] { optim::cosineDecay(0.1, 10, NAN); }, {"optim::cosineDecay: floor must be in [0, base], got nan"});
  expectError([] { init::normal(NAN); }, {"init::normal: the deviation must be >= 0 and finite, not nan"});
  expectError([] { nn::BatchNorm2d("stage1.0.bn1", 64, 1e-5, NAN); },
              {"nn::BatchNorm2d 'stage1.0.bn1'", "momentum in [0, 1]"});
  expectError([] { nn::LayerNorm("ln", 8, NAN); }, {"nn::LayerNorm 'ln'", "epsilon positive and finite"});
  expectError([] { nn::Embedding("tokens", -1, 8); }, {"nn::Embedding 'tokens' (count -1, dim 8)"});
  expectError([] {
    nn::Linear layer("head", 3, -1);
    Rng rng(1);
    Tree params, state;
    layer.init(rng, params, state);
  }, {"nn::Linear 'head' (in 3, out -1): in and out must be non-negative"});
}

// A wrong dtype (arithmetic on i32 labels or ids, float labels) is refused as the op is traced,
// at the user's line, saying how to convert; not by the pipeline's verifier after tracing ("IR
// verification failed after tracing", with MLIR's generic form of the op).
TEST(BadInput, WrongDtypesAreRefusedAtTheCallSayingHowToConvert) {
  Tensor labels = Array::of<int32_t>({2}, std::vector<int32_t>{0, 7});
  Tensor logits = testing::randomArray(DType::f32, {2, 8}, 1);
  const std::string line = "BadInputTest.cpp:" + std::to_string(__LINE__ + 1) + ":";
  auto doubled = jit([](const Tensor& v) { return v + v; });
  const std::string toFloat = "convert the i32 operand with spmd::cast(x, DType::f32) first";
  expectError([&] { doubled(labels); },
              {line, "'spmd.add' op operand #0 must be ranked tensor of", "but got 'tensor<2xi32>'", toFloat});
  for (const std::string& message :
       {testing::errorOf([&] { jit([](const Tensor& v) { return exp(v); })(labels); }),
        testing::errorOf([&] { jit([](const Tensor& v) { return sum(v, {0}); })(labels); }),
        testing::errorOf([&] { jit([](const Tensor& v) { return neg(v); })(Tensor(Array::of<int32_t>({}, std::vector<int32_t>{3}))); }),
        testing::errorOf([&] { jit([](const Tensor& v) { return matmul(reshape(v, {1, 2}), reshape(v, {2, 1})); })(labels); })}) {
    EXPECT_NE(message.find(toFloat), std::string::npos) << message;
    EXPECT_EQ(message.find("IR verification failed"), std::string::npos) << message;
    EXPECT_EQ(message.find("see current operation"), std::string::npos) << message;
  }
  Tensor floatLabels = Array::of<float>({2}, std::vector<float>{0, 7});
  expectError([&] { jit([](const Tensor& a, const Tensor& b) { return softmaxCrossEntropy(a, b); })(logits, floatLabels); },
              {"'spmd.softmax_cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer values, but got "
               "'tensor<2xf32>'; convert it with spmd::cast(x, DType::i32) first"});
  // Converted, the same calls run.
  auto converted = jit([](const Tensor& v) { return cast(v, DType::f32) + cast(v, DType::f32); });
  EXPECT_EQ(converted(labels).array().values<float>()[1], 14.0f);
}

TEST(BadInput, ExecutorChecksInputsAndNamesFailingStep) {
  auto f = jit([](const Tensor& logits, const Tensor& labels) { return softmaxCrossEntropy(logits, labels); });
  Tensor logits = Array::zeros(DType::f32, {2, 3});
  Tensor labels = Array::of<int32_t>({2}, std::vector<int32_t>{0, 7});
  expectError([&] { f(logits, labels); },
              {"'softmax_cross_entropy'", "BadInputTest.cpp:", "label 7 at row 1 is out of range [0, 3)"});

  runtime::Program program;
  program.name = "p";
  program.buffers = {{DType::f32, {2}, {}}, {DType::f32, {2}, {}}};
  program.inputs = {0};
  program.outputs = {1};
  program.steps = {{"relu", {0}, {1}, {}, "x.cpp:1"}};
  runtime::Executor executor(program, std::make_shared<runtime::CpuDevice>());
  expectError([&] { executor.run(std::vector<Array>{Array::zeros(DType::f32, {3})}); },
              {"input 0 of @p must be f32[2], got f32[3]"});
  expectError([&] { executor.run(std::vector<Array>{}); }, {"takes 1 inputs, got 0"});
  program.steps[0].op = "no_such_op";
  expectError([&] { runtime::Executor(program, std::make_shared<runtime::CpuDevice>()); },
              {"device cpu:0 has no kernel for op 'no_such_op' (x.cpp:1)"});
}

TEST(BadInput, EmbeddingIdOutOfRangeIsAnErrorOnEveryBackend) {
  Tensor table = Array::zeros(DType::f32, {7, 4});
  Tensor ids = Array::of<int32_t>({2, 2}, std::vector<int32_t>{1, 6, 9, 0});
  for (const char* devices : {"cpu", "sim"}) {
    auto f = jit([](const Tensor& t, const Tensor& i) { return embedding(t, i); }, {.devices = devices});
    expectError([&] { f(table, ids); },
                {"'embedding'", "BadInputTest.cpp:", "embedding id 9 at position 2 of the ids is out of range [0, 7)"});
  }
}

TEST(BadInput, TakeAlongAxisAndScatterAddIndexOutOfRangeIsAnErrorOnEveryBackend) {
  Tensor x = Array::zeros(DType::f32, {2, 3});
  Tensor at = Array::of<int32_t>({2, 2}, std::vector<int32_t>{1, 2, 0, 3});
  Tensor below = Array::of<int32_t>({2, 2}, std::vector<int32_t>{1, -1, 0, 2});
  for (const char* devices : {"cpu", "sim"}) {
    SCOPED_TRACE(devices);
    auto gather = jit([](const Tensor& t, const Tensor& i) { return takeAlongAxis(t, i, 1); }, {.devices = devices});
    expectError([&] { gather(x, at); }, {"'take_along_axis'", "BadInputTest.cpp:",
                                         "index 3 at position 3 of the indices is out of range [0, 3)"});
    // A scatter never drops an update silently: the same check, at the user's scatterAdd line.
    auto scatter = jit([](const Tensor& t, const Tensor& i) { return scatterAdd(t, i, slice(t, {0, 0}, {2, 2}), 1); },
                       {.devices = devices});
    expectError([&] { scatter(x, below); }, {"'take_along_axis_backward'", "BadInputTest.cpp:",
                                             "index -1 at position 1 of the indices is out of range [0, 3)"});
  }
}

}  // namespace
}  // namespace spmd
