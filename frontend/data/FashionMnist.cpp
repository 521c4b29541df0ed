// IDX reader for Fashion-MNIST through zlib's gzip interface.
#include "frontend/data/FashionMnist.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace spmd::data {
namespace {

struct GzFile {
  gzFile file;
  std::string path;
  ~GzFile() { if (file) gzclose(file); }

  void read(void* out, size_t bytes, const char* what) {
    size_t done = 0;
    while (done < bytes) {
      int chunk = static_cast<int>(std::min<size_t>(bytes - done, 1 << 30));
      int got = gzread(file, static_cast<char*>(out) + done, chunk);
      if (got <= 0)
        throw Error(path + ": truncated or corrupt while reading " + what + " (" +
                    std::to_string(done) + " of " + std::to_string(bytes) + " bytes)");
      done += static_cast<size_t>(got);
    }
  }
  // `bytes` bytes, read in blocks so memory grows only with data that is really there: a header
  // that claims billions of images is a truncation error, not a huge allocation (found by fuzzing).
  std::vector<unsigned char> readBlocks(size_t bytes, const char* what) {
    constexpr size_t kBlock = size_t(1) << 22;
    std::vector<unsigned char> out;
    while (out.size() < bytes) {
      size_t at = out.size(), take = std::min(kBlock, bytes - at);
      out.resize(at + take);
      int got = 0;
      for (size_t done = 0; done < take; done += static_cast<size_t>(got)) {
        got = gzread(file, out.data() + at + done, static_cast<unsigned>(take - done));
        if (got <= 0)
          throw Error(path + ": truncated or corrupt while reading " + what + " (" +
                      std::to_string(at + done) + " of " + std::to_string(bytes) +
                      " bytes the header promises)");
      }
    }
    return out;
  }
  uint32_t bigEndian(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  }
};

std::unique_ptr<GzFile> open(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw Error(path + ": not found. Install Fashion-MNIST with `apt-get install "
                "dataset-fashion-mnist`, or point SPMD_FASHION_MNIST_DIR at a folder holding "
                "the four *-ubyte.gz files");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open");
  return std::unique_ptr<GzFile>(new GzFile{f, path});
}

// Reads an IDX header with the given magic and rank; returns the dims.
std::vector<uint32_t> header(GzFile& file, uint32_t magic, int rank) {
  uint32_t got = file.bigEndian("the magic number");
  if (got != magic)
    throw Error(file.path + ": magic number " + std::to_string(got) + ", expected " +
                std::to_string(magic) + " (is this an IDX file of the right kind?)");
  std::vector<uint32_t> dims;
  for (int i = 0; i < rank; ++i) dims.push_back(file.bigEndian("the header"));
  return dims;
}

}  // namespace

std::string defaultFashionMnistDir() {
  const char* env = std::getenv("SPMD_FASHION_MNIST_DIR");
  return env ? env : "/usr/share/datasets/fashion-mnist";
}

Dataset loadFashionMnist(const std::string& split, int64_t limit, const std::string& dir) {
  if (split != "train" && split != "test")
    throw Error("loadFashionMnist: split must be \"train\" or \"test\", got \"" + split + "\"");
  std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  auto images = open(prefix + "-images-idx3-ubyte.gz");
  auto labels = open(prefix + "-labels-idx1-ubyte.gz");
  std::vector<uint32_t> imageDims = header(*images, 2051, 3);
  std::vector<uint32_t> labelDims = header(*labels, 2049, 1);
  if (imageDims[0] != labelDims[0] || imageDims[1] != 28 || imageDims[2] != 28)
    throw Error(prefix + ": " + std::to_string(imageDims[0]) + " images of " +
                std::to_string(imageDims[1]) + "x" + std::to_string(imageDims[2]) + " and " +
                std::to_string(labelDims[0]) + " labels; expected equal counts of 28x28 images");
  int64_t n = imageDims[0];
  if (limit > 0) n = std::min<int64_t>(n, limit);

  std::vector<unsigned char> pixels = images->readBlocks(static_cast<size_t>(n) * 28 * 28, "pixels");
  std::vector<unsigned char> classes = labels->readBlocks(static_cast<size_t>(n), "labels");
  Dataset data{Array::zeros(DType::f32, {n, 1, 28, 28}), Array::zeros(DType::i32, {n})};
  auto x = data.images().values<float>();
  for (size_t i = 0; i < pixels.size(); ++i) x[i] = float(pixels[i]) / 255.0f;
  auto y = data.labels().values<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (classes[i] > 9)
      throw Error(prefix + "-labels-idx1-ubyte.gz: label " + std::to_string(classes[i]) +
                  " at index " + std::to_string(i) + " is not a class 0..9");
    y[i] = classes[i];
  }
  return data;
}


}  // namespace spmd::data
