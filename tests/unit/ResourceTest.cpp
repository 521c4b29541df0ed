// Memory and dump directories: a program that does not fit in the available host memory fails
// before its first step with the sizes and what to lower (never a bare std::bad_alloc or an OOM
// kill); an impossible array is a clear error; IR dumps of different functions and signatures
// land in their own subdirectories and never overwrite each other.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/base/AtomicFile.h"
#include "runtime/base/HostMemory.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

TEST(ResourceTest, AProgramThatDoesNotFitFailsBeforeItsFirstStep) {
  ScopedEnv limit("SPMD_HOST_MEMORY_BYTES", "1000000");  // 0.95 MiB "available"
  auto step = pmap([](const Tensor& x) { return relu(mul(exp(x), fill(x, 2.0))); },
                   {.inAxes = {split}, .outAxes = {split}, .devices = "cpu:2", .name = "big"});
  Array x = Array::zeros(DType::f32, {2, 256, 1024});  // 1 MiB per replica
  std::string message = errorOf([&] { step(x); });
  EXPECT_NE(message.find("program @big on cpu:2 (2 replicas x "), std::string::npos) << message;
  EXPECT_NE(message.find("of host memory but only 976.6 KiB is available; lower the batch size or the "
                         "model size, or use fewer devices"), std::string::npos) << message;
  auto one = jit([](const Tensor& x) { return exp(exp(x)); }, {.name = "single"});
  std::string jitMessage = errorOf([&] { one(Array::zeros(DType::f32, {512, 1024})); });
  EXPECT_NE(jitMessage.find("program @single on cpu:1 (1 replica x "), std::string::npos) << jitMessage;
  // Sizes under 1 MiB in KiB or bytes, not "0.0 MiB".
  EXPECT_EQ(runtime::formatBytes(1000), "1000 bytes");
  EXPECT_EQ(runtime::formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(runtime::formatBytes(size_t(3) << 20), "3.0 MiB");
}

TEST(ResourceTest, AvailableMemoryIsReadAndTheOverrideIsChecked) {
  EXPECT_GT(runtime::availableHostBytes(), size_t(16) << 20) << "MemAvailable or the cgroup limit";
  ScopedEnv bad("SPMD_HOST_MEMORY_BYTES", "lots");
  EXPECT_EQ(errorOf([] { runtime::availableHostBytes(); }),
            "SPMD_HOST_MEMORY_BYTES needs a whole number from 0 to 9223372036854775807, got 'lots'");
}

TEST(ResourceTest, AnImpossibleArrayIsAClearError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan's operator new aborts on an impossible size instead of throwing std::bad_alloc";
#endif
  std::string message = errorOf([] { Array::zeros(DType::f32, {1 << 20, 1 << 20, 1 << 10}); });
  EXPECT_NE(message.find("cannot allocate an array f32[1048576, 1048576, 1024]"), std::string::npos) << message;
  EXPECT_NE(message.find("out of host memory"), std::string::npos) << message;
}

TEST(ResourceTest, DumpsOfEachFunctionAndSignatureGoToTheirOwnDirectory) {
  auto root = std::filesystem::temp_directory_path() / ("spmd-dumps-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  ScopedEnv dump("SPMD_DUMP_IR", root.c_str());
  auto train = jit([](const Tensor& x) { return relu(x); }, {.name = "train_step"});
  auto eval = jit([](const Tensor& x) { return exp(x); }, {.name = "eval_step"});
  auto other = jit([](const Tensor& x) { return neg(x); }, {.name = "eval_step"});  // same name
  train(Array::zeros(DType::f32, {4}));
  std::string first = train.lastDumpDir();
  train(Array::zeros(DType::f32, {8}));  // new signature: recompiles
  eval(Array::zeros(DType::f32, {4}));
  other(Array::zeros(DType::f32, {4}));
  std::set<std::string> dirs = {first, train.lastDumpDir(), eval.lastDumpDir(), other.lastDumpDir()};
  EXPECT_EQ(dirs.size(), 4u) << "no two compilations share a dump directory";
  for (const std::string& d : dirs) {
    EXPECT_EQ(std::filesystem::path(d).parent_path(), root);
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(d) / "00-tracing.mlir")) << d;
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(d) / "program.spmd")) << d;
  }
  EXPECT_EQ(std::filesystem::path(first).filename().string().rfind("train_step-", 0), 0u) << first;
  EXPECT_NE(testing::readBytes((std::filesystem::path(eval.lastDumpDir()) / "program.txt").string()).find("exp"),
            std::string::npos);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// Two writers of one path (two runs on one --out, before the sample's lock existed) never share
// a temporary file: every read sees one writer's complete contents.
TEST(ResourceTest, AtomicWritesOfOnePathFromTwoWritersNeverTear) {
  auto dir = std::filesystem::temp_directory_path() / ("spmd-atomic-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "checkpoint.bin").string();
  auto writer = [&](char fill) {
    std::string text(1 << 16, fill);
    for (int i = 0; i < 100; ++i) writeFileAtomically(path, {std::as_bytes(std::span(text.data(), text.size()))});
  };
  std::thread a(writer, 'a'), b(writer, 'b');
  int torn = 0;
  for (int i = 0; i < 200; ++i) {
    std::string now = testing::readBytes(path);
    if (now.empty()) continue;  // not written yet
    torn += now.size() != (1u << 16) || now.find_first_not_of(now[0]) != std::string::npos;
  }
  a.join();
  b.join();
  EXPECT_EQ(torn, 0);
  size_t leftovers = std::distance(std::filesystem::directory_iterator(dir), {});
  EXPECT_EQ(leftovers, 1u) << "no temporary file is left behind";
  std::filesystem::remove_all(dir);
}

// A write that cannot happen names the path asked for and why: a directory where the file would
// be, a directory that does not exist (not only the temporary file's name and errno).
TEST(ResourceTest, AnAtomicWriteThatCannotHappenSaysWhy) {
  const std::string none = "/nonexistent-spmd-dir/x.safetensors";
  std::string message = testing::errorOf([&] { writeFileAtomically(none, {}); });
  EXPECT_EQ(message.rfind(none + ": cannot write: its temporary file /nonexistent-spmd-dir/.x.safetensors.", 0), 0u) << message;
  EXPECT_NE(message.find("the directory /nonexistent-spmd-dir does not exist: create it"), std::string::npos) << message;
  const std::string dir = std::filesystem::temp_directory_path().string();
  message = testing::errorOf([&] { writeFileAtomically(dir, {}); });
  EXPECT_EQ(message, dir + ": is a directory; name a file (in it, or beside it) to write");
}

}  // namespace
}  // namespace spmd
