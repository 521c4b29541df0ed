// The sample's building blocks: safetensors round trips (all dtypes, metadata) and every kind
// of corrupt file as a clear error; the epoch shuffle (a permutation fixed by seed and epoch);
// the prefetching loader (every example once, in order; uneven splits and the last batch padded
// and masked; resuming mid-epoch; several processes' parts).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "TestUtil.h"
#include "frontend/data/FashionMnist.h"
#include "frontend/data/Loader.h"
#include "frontend/io/Safetensors.h"
#include "frontend/io/TreeCheckpoint.h"
#include "runtime/base/AtomicFile.h"

namespace spmd {
namespace {

using spmd::testing::randomArray;
using spmd::testing::readBytes;

// Safetensors tests write into a fresh directory of their own, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string tempPath(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("spmd-ckpt-" + std::to_string(::getpid()));
};

std::string errorOf(const std::string& path) {
  try {
    io::loadSafetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error for " << path;
  return "";
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(SafetensorsTest, RoundTripKeepsEveryBitAndTheMetadata) {
  io::Checkpoint c;
  c.tensors["params.w"] = randomArray(DType::f32, {3, 4}, 1);
  c.tensors["params.b"] = randomArray(DType::f64, {5}, 2);
  c.tensors["state.count"] = Array::of<int32_t>({2}, std::vector<int32_t>{7, -3});
  c.tensors["scalar"] = randomArray(DType::f32, {}, 3);
  c.metadata = {{"epoch", "2"}, {"note", "with \"quotes\" and\nnewline"}};
  std::string path = tempPath("round.safetensors");
  io::saveSafetensors(path, c);
  io::Checkpoint back = io::loadSafetensors(path);
  EXPECT_EQ(back.metadata, c.metadata);
  ASSERT_EQ(back.tensors.size(), c.tensors.size());
  for (const auto& [name, a] : c.tensors) {
    const Array& b = back.tensors.at(name);
    EXPECT_EQ(b.dtype, a.dtype) << name;
    EXPECT_EQ(b.shape, a.shape) << name;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0) << name;
  }
  // The header is the documented layout: u64 length, then JSON starting with '{'.
  std::string bytes = readBytes(path);
  uint64_t length;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(bytes[8], '{');
  EXPECT_EQ((8 + length) % 8, 0u);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(path).parent_path() / ".round.safetensors.tmp"));
}

TEST_F(SafetensorsTest, TreesGoInUnderAPrefixAndComeBackCheckedAgainstTheModel) {
  Tree params, state;
  params.set("fc.weight", randomArray(DType::f32, {3, 4}, 1));
  params.set("fc.bias", randomArray(DType::f32, {3}, 2));
  state.set("bn.mean", randomArray(DType::f64, {4}, 3));
  io::Checkpoint c;
  io::addTree(c, "params.", params);
  io::addTree(c, "state.", state);
  std::string path = tempPath("trees.safetensors");
  io::saveSafetensors(path, c);
  io::Checkpoint back = io::loadSafetensors(path);
  testing::expectSameBits(io::readTree(back, "params.", params, path), params, "params");
  testing::expectSameBits(io::readTree(back, "state.", state, path), state, "state");

  Tree wider;
  wider.set("fc.weight", randomArray(DType::f32, {3, 5}, 1));
  EXPECT_EQ(testing::errorOf([&] { io::readTree(back, "params.", wider, path, "another --width?"); }),
            path + ": tensor 'params.fc.weight' is f32[3, 4] but the model needs f32[3, 5] (another --width?)");
  Tree other;
  other.set("conv.weight", randomArray(DType::f32, {1}, 1));
  EXPECT_EQ(testing::errorOf([&] { io::readTree(back, "params.", other, path); }),
            path + ": checkpoint has no tensor 'params.conv.weight'");
}

TEST_F(SafetensorsTest, CorruptFilesAreClearErrors) {
  const std::string dir = std::filesystem::path(tempPath("x")).parent_path().string();
  EXPECT_NE(errorOf(dir).find(dir + ": is a directory, not a checkpoint file"), std::string::npos) << errorOf(dir);
  EXPECT_NE(errorOf("/dev/zero").find("/dev/zero: is not a regular file"), std::string::npos) << errorOf("/dev/zero");
  io::Checkpoint c;
  c.tensors["w"] = randomArray(DType::f32, {4, 4}, 1);
  std::string good = tempPath("good.safetensors");
  io::saveSafetensors(good, c);
  std::string bytes = readBytes(good);
  std::string bad = tempPath("bad.safetensors");

  EXPECT_EQ(errorOf(tempPath("missing.safetensors")).find(": cannot open checkpoint"), tempPath("missing.safetensors").size());
  writeBytes(bad, bytes.substr(0, 5));
  EXPECT_EQ(errorOf(bad), bad + ": not a valid safetensors checkpoint: the file has 5 bytes, fewer "
                              "than the 8-byte header length");
  writeBytes(bad, bytes.substr(0, 20));
  EXPECT_NE(errorOf(bad).find("exceeds the file (20 bytes): truncated or not safetensors"), std::string::npos);
  writeBytes(bad, bytes.substr(0, bytes.size() - 10));  // data cut short
  EXPECT_NE(errorOf(bad).find("tensor 'w' has data_offsets outside the 54 data bytes (truncated file?)"),
            std::string::npos) << errorOf(bad);
  std::string broken = bytes;
  broken[9] = '[';  // JSON no longer an object / valid
  writeBytes(bad, broken);
  EXPECT_NE(errorOf(bad).find("the header is not valid JSON"), std::string::npos) << errorOf(bad);
  std::string dtype = bytes;
  dtype.replace(dtype.find("F32"), 3, "F16");
  writeBytes(bad, dtype);
  EXPECT_NE(errorOf(bad).find("tensor 'w' has dtype F16; spmd reads F32, F64, BF16 and I32"), std::string::npos);
  // Numbers JSON holds but a shape cannot (found by fuzz_safetensors: a dimension past 2^64
  // parses as a float), and shapes whose bytes overflow or miss the range.
  for (auto [from, to, message] : {std::tuple{"[4,4]", "[2,44444444444444444444442]", "shape holds 4.4444444444444445e+22, not a whole number"},
                                   std::tuple{"[4,4]", "[4,-4]", "shape holds -4, not a whole number"},
                                   std::tuple{"[4,4]", "[4,4.0]", "shape holds 4.0, not a whole number"},
                                   std::tuple{"[4,4]", "[4,4611686018427387904]", "which does not fit its 64 bytes"},
                                   std::tuple{"[4,4]", "[4,3]", "which does not fit its 64 bytes"}}) {
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    std::string header = bytes.substr(8, length);
    header.replace(header.find(from), std::strlen(from), to);
    length = header.size();
    writeBytes(bad, std::string(reinterpret_cast<const char*>(&length), 8) + header + bytes.substr(8 + header.size() - std::strlen(to) + std::strlen(from)));
    EXPECT_NE(errorOf(bad).find(message), std::string::npos) << to << ": " << errorOf(bad);
  }
  writeBytes(bad, std::string(64, 'x'));
  EXPECT_NE(errorOf(bad).find("not a valid safetensors checkpoint"), std::string::npos);
}

// The user's report: plausible weights written over a checkpoint resumed silently, NaN bytes
// were blamed on the learning rate, and a save killed midway left its temporary forever.
TEST_F(SafetensorsTest, ChangedTensorsNaNsAndStaleTemporariesAreCaught) {
  io::Checkpoint c;
  c.tensors["params.w"] = randomArray(DType::f32, {10, 10}, 1);
  c.tensors["params.b"] = randomArray(DType::f32, {10}, 2);
  c.metadata["step"] = "7";
  std::string path = tempPath("ckpt.safetensors");
  io::saveSafetensors(path, c);
  io::Checkpoint back = io::loadSafetensors(path);
  EXPECT_EQ(back.metadata, c.metadata) << "the checksums stay in the file, not in what the caller sees";
  // A plausible value (the next float up) over one weight: the file is otherwise valid.
  std::string bytes = readBytes(path);
  float weight;
  const size_t at = bytes.size() - 4 * 100 + 4 * 37;  // params.w's element 37 (tensors in name order: b, w)
  std::memcpy(&weight, bytes.data() + at, 4);
  weight = std::nextafter(weight, 2.0f);
  std::memcpy(bytes.data() + at, &weight, 4);
  std::string bad = tempPath("changed.safetensors");
  writeBytes(bad, bytes);
  EXPECT_NE(errorOf(bad).find("tensor 'params.w' does not match its checksum"), std::string::npos) << errorOf(bad);
  EXPECT_NE(errorOf(bad).find("the file was changed or damaged after it was written"), std::string::npos);
  // The header is checked too: an edited metadata field is named with what it now reads, and a
  // dtype edited to one of the same size (F32 -> I32) breaks the tensor table's checksum.
  for (auto [from, to, expected] :
       {std::tuple{"\"step\":\"7\"", "\"step\":\"8\"", "metadata 'step' (\"8\") does not match its checksum"},
        {"\"dtype\":\"F32\"", "\"dtype\":\"I32\"", "its tensor table (names, dtypes, shapes) does not match"},
        {"\"step\":\"7\"", "\"stop\":\"7\"", "metadata 'stop' has no checksum"}}) {
    std::string header = readBytes(path);
    const size_t where = header.find(from);
    ASSERT_NE(where, std::string::npos) << from;
    header.replace(where, std::strlen(from), to);
    writeBytes(bad, header);
    EXPECT_NE(errorOf(bad).find(expected), std::string::npos) << errorOf(bad);
  }
  // A checkpoint saved with a NaN in it (a diverged run): named, tensor and element, on resume.
  io::Checkpoint nan = c;
  nan.tensors["params.w"] = testing::cloneArray(c.tensors["params.w"]);
  nan.tensors["params.w"].values<float>()[42] = std::nanf("");
  io::saveSafetensors(path, nan);
  Tree like;
  like.set("w", Array::zeros(DType::f32, {10, 10}));
  like.set("b", Array::zeros(DType::f32, {10}));
  std::string message = testing::errorOf([&] { io::readTree(io::loadSafetensors(path), "params.", like, path); });
  EXPECT_NE(message.find("tensor 'params.w' holds NaN at element 42; the checkpoint was saved from a diverged run or "
                         "is damaged: resume from an earlier one"), std::string::npos) << message;
  // A save killed midway leaves ".ckpt.safetensors.XXXXXX" beside the file; the next run's
  // cleanup removes exactly those.
  writeBytes(tempPath(".ckpt.safetensors.a1B2c3"), "half a checkpoint");
  writeBytes(tempPath(".ckpt.safetensors.note"), "not ours: other length");
  EXPECT_EQ(removeStaleTemporaries(path), 1);
  EXPECT_FALSE(std::filesystem::exists(tempPath(".ckpt.safetensors.a1B2c3")));
  EXPECT_TRUE(std::filesystem::exists(tempPath(".ckpt.safetensors.note")));
  EXPECT_TRUE(std::filesystem::exists(path));
}

// An IDX header that promises far more images than the file holds is a truncation error after
// reading what is there, never an allocation of what the header claims (found by fuzz_idx: a
// header of 3,145,730 images made the reader allocate 2.4 GB).
TEST(LoaderTest, AnIdxHeaderPromisingMoreThanTheFileIsATruncationError) {
  auto dir = std::filesystem::temp_directory_path() / ("spmd-idx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bigEndian = [](std::ofstream& out, uint32_t v) {
    const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    out.write(b, 4);
  };
  {
    std::ofstream images(dir / "train-images-idx3-ubyte.gz", std::ios::binary);  // plain IDX: zlib reads it too
    for (uint32_t v : {2051u, 3145730u, 28u, 28u}) bigEndian(images, v);
    images << std::string(2 * 784, '\1');
    std::ofstream labels(dir / "train-labels-idx1-ubyte.gz", std::ios::binary);
    for (uint32_t v : {2049u, 3145730u}) bigEndian(labels, v);
    labels << std::string(2, '\3');
  }
  try {
    data::loadFashionMnist("train", 0, dir.string());
    ADD_FAILURE() << "expected a truncation error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte.gz: truncated or corrupt while reading pixels "
                                         "(1568 of 2466252320 bytes the header promises)"),
              std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(LoaderTest, EpochOrderIsAPermutationFixedBySeedAndEpoch) {
  auto a = data::epochOrder(1000, 7, 0), b = data::epochOrder(1000, 7, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, data::epochOrder(1000, 7, 1));
  EXPECT_NE(a, data::epochOrder(1000, 8, 0));
  std::set<int64_t> seen(a.begin(), a.end());
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 999);
  // Pinned first elements: the order must not change between builds or machines (resuming a
  // checkpoint relies on it).
  EXPECT_EQ(std::vector<int64_t>(a.begin(), a.begin() + 3), (std::vector<int64_t>{125, 106, 292}));
}

data::Dataset fakeData(int64_t n) {
  data::Dataset d{Array::zeros(DType::f32, {n, 1, 28, 28}), Array::zeros(DType::i32, {n})};
  for (int64_t i = 0; i < n; ++i) {
    d.images().values<float>()[i * 784] = float(i);  // first pixel = row index
    d.labels().values<int32_t>()[i] = int32_t(i);
  }
  return d;
}

TEST(LoaderTest, YieldsEveryExampleInShuffledOrderTheLastBatchPadded) {
  data::Dataset d = fakeData(103);
  auto order = data::epochOrder(103, 3, 2);
  data::Prefetcher loader(d, 10, 3, 2);
  EXPECT_EQ(loader.batchesPerEpoch(), 11);
  int64_t batches = 0, seen = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->index, batches);
    EXPECT_EQ(b->images().shape, (Shape{10, 1, 28, 28}));  // the compiled shape, every batch
    EXPECT_EQ(b->examples, batches < 10 ? 10 : 3);
    for (int64_t r = 0; r < 10; ++r) {
      const bool example = r < b->examples;
      EXPECT_EQ(b->mask.values<float>()[r], example ? 1.0f : 0.0f);
      EXPECT_EQ(b->labels().values<int32_t>()[r], example ? order[batches * 10 + r] : 0);
      EXPECT_EQ(b->images().values<float>()[r * 784], example ? float(order[batches * 10 + r]) : 0.0f);
    }
    seen += b->examples;
    ++batches;
  }
  EXPECT_EQ(batches, 11);
  EXPECT_EQ(seen, 103);  // every example, none twice (the labels above are the order's)
  EXPECT_FALSE(loader.next().has_value());
  data::Prefetcher dropping(d, 10, 3, 2, 0, 2, {.dropLast = true});
  EXPECT_EQ(dropping.batchesPerEpoch(), 10);
}

// A batch of 10 over 4 parts (replicas) of 3 rows: the parts take 3, 3, 2 and 2 examples in
// order, each padded to 3; the last batch of the epoch (5 examples) 2, 1, 1, 1. Two processes
// assemble parts 0-1 and 2-3.
TEST(LoaderTest, UnevenSplitsDealExamplesEvenlyAndPadEachPart) {
  data::Dataset d = fakeData(25);
  auto order = data::epochOrder(25, 7, 0);
  for (int process = 0; process < 2; ++process) {
    data::BatchLayout layout = data::layoutOfProcess(10, process, 2, 2);
    EXPECT_EQ(layout.parts, 4);
    EXPECT_EQ(layout.partRows, 3);
    data::Prefetcher loader(d, 10, 7, 0, 0, 2, layout);
    EXPECT_EQ(loader.rows(), 6);
    std::vector<std::vector<int64_t>> counts = {{3, 3, 2, 2}, {3, 3, 2, 2}, {2, 1, 1, 1}};
    int64_t batch = 0;
    while (auto b = loader.next()) {
      EXPECT_EQ(b->examples, batch < 2 ? 10 : 5);
      EXPECT_DOUBLE_EQ(b->lossScale(), 4.0 / double(b->examples));
      int64_t example = batch * 10;  // this batch's first example in the order
      for (int p = 0; p < 2 * process; ++p) example += counts[batch][p];
      for (int local = 0; local < 2; ++local) {
        const int64_t count = counts[batch][2 * process + local];
        for (int64_t k = 0; k < 3; ++k) {
          const int64_t row = local * 3 + k;
          EXPECT_EQ(b->mask.values<float>()[row], k < count ? 1.0f : 0.0f) << "batch " << batch << " row " << row;
          EXPECT_EQ(b->labels().values<int32_t>()[row], k < count ? order[example + k] : 0);
        }
        example += count;
      }
      ++batch;
    }
    EXPECT_EQ(batch, 3);
  }
}

TEST(LoaderTest, StartingMidEpochGivesTheSameRemainingBatches) {
  data::Dataset d = fakeData(64);
  data::Prefetcher full(d, 8, 5, 1), tail(d, 8, 5, 1, /*first=*/3);
  std::vector<std::vector<int32_t>> a, b;
  while (auto x = full.next())
    if (x->index >= 3) a.emplace_back(x->labels().values<int32_t>().begin(), x->labels().values<int32_t>().end());
  while (auto x = tail.next()) b.emplace_back(x->labels().values<int32_t>().begin(), x->labels().values<int32_t>().end());
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.size(), 5u);
}

TEST(LoaderTest, AnyColumnsBatchAndShardByProcess) {
  // Three columns of other dtypes and shapes: f64 [N, 3], i32 [N, 2], f32 [N]; row i holds i.
  const int64_t n = 24;
  Array a = Array::zeros(DType::f64, {n, 3}), b = Array::zeros(DType::i32, {n, 2}), c = Array::zeros(DType::f32, {n});
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) a.values<double>()[i * 3 + k] = double(i) + 0.25 * k;
    for (int k = 0; k < 2; ++k) b.values<int32_t>()[i * 2 + k] = int32_t(100 * i + k);
    c.values<float>()[i] = float(-i);
  }
  data::Dataset d({a, b, c});
  const int64_t batch = 8;
  std::vector<int64_t> order = data::epochOrder(n, 3, 1);
  // 2 processes x 2 replicas: process p reads rows [4p, 4p + 4) of each batch.
  for (int process = 0; process < 2; ++process) {
    data::Prefetcher loader(d, batch, 3, 1, 0, 2, data::layoutOfProcess(batch, process, 2, 2));
    int64_t batches = 0;
    while (auto got = loader.next()) {
      ASSERT_EQ(got->columns.size(), 3u);
      EXPECT_EQ(got->columns[0].shape, (Shape{4, 3}));
      EXPECT_EQ(got->columns[1].shape, (Shape{4, 2}));
      EXPECT_EQ(got->columns[2].shape, (Shape{4}));
      for (int64_t r = 0; r < 4; ++r) {
        int64_t row = order[batches * batch + 4 * process + r];
        EXPECT_EQ(got->columns[0].values<double>()[r * 3 + 2], double(row) + 0.5);
        EXPECT_EQ(got->columns[1].values<int32_t>()[r * 2 + 1], int32_t(100 * row + 1));
        EXPECT_EQ(got->columns[2].values<float>()[r], float(-row));
      }
      ++batches;
    }
    EXPECT_EQ(batches, n / batch);
  }
  EXPECT_EQ(testing::errorOf([&] { data::layoutOfProcess(10, 2, 2, 2); }),
            "layoutOfProcess: process 2 of 2 with 2 parts each is not a process of the job");
  EXPECT_EQ(testing::errorOf([&] { data::Dataset(a, Array::zeros(DType::i32, {n - 1})); }),
            "data::Dataset: column 1 has 23 examples but column 0 has 24");
}

TEST(LoaderTest, BadBatchSizesAreClearErrors) {
  data::Dataset d = fakeData(10);
  try {
    data::Prefetcher loader(d, 11, 0, 0);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "batch size 11 is larger than the data set (10 examples); use a "
                                     "smaller batch or more data");
  }
}

}  // namespace
}  // namespace spmd
