// Helpers shared by the unit tests: seeded random arrays, an elementwise comparison that
// reports the largest difference it saw, deep copies, every axis of a tensor, file bytes.
#pragma once

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <filesystem>
#include <string>
#include <tuple>

#include "frontend/Tensor.h"
#include "frontend/Tree.h"
#include "runtime/base/Array.h"

namespace spmd::testing {

// How often `what` occurs in `text` (overlapping occurrences counted).
inline size_t countOccurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Runs fn and returns the message of the exception it throws (spmd::Error or another
// std::exception), or "no error", which no expected message matches.
template <typename Fn>
std::string errorOf(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

inline Array randomArray(DType dtype, const Shape& shape, uint64_t seed, double low = -1.0,
                         double high = 1.0) {
  Array a = Array::zeros(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  if (dtype == DType::f32)
    for (float& v : a.values<float>()) v = static_cast<float>(dist(rng));
  else if (dtype == DType::f64)
    for (double& v : a.values<double>()) v = dist(rng);
  else if (dtype == DType::bf16)
    for (bf16& v : a.values<bf16>()) v = toBf16(static_cast<float>(dist(rng)));
  else
    for (int32_t& v : a.values<int32_t>())
      v = static_cast<int32_t>(std::floor(dist(rng)));
  return a;
}

inline double valueAt(const Array& a, int64_t i) {
  switch (a.dtype) {
    case DType::f32: return a.values<float>()[i];
    case DType::f64: return a.values<double>()[i];
    case DType::i32: return a.values<int32_t>()[i];
    case DType::bf16: return fromBf16(a.values<bf16>()[i]);
  }
  return 0;
}

// The largest |a - b| over the largest |b|: b's scale (a reference's), one number for a whole tensor.
inline double maxRelativeError(const Array& a, const Array& b) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::fabs(valueAt(a, i) - valueAt(b, i)));
    scale = std::max(scale, std::fabs(valueAt(b, i)));
  }
  return diff / scale;
}

// |actual - expected| <= atol + rtol * |expected| everywhere (NaN fails); returns the largest
// absolute difference for the report.
// With `magnitude` (the same computation on the inputs' absolute values: the sum of its terms'
// sizes, for a convolution or a matmul), `mtol` times it is allowed too: the error bound of an
// algorithm that sums in another order or transforms (Winograd, FFT), where an output that
// cancels is small beside its terms.
inline double expectClose(const Array& actual, const Array& expected, double rtol, double atol,
                          const std::string& what, const Array* magnitude = nullptr, double mtol = 0) {
  EXPECT_EQ(actual.dtype, expected.dtype) << what;
  EXPECT_EQ(actual.shape, expected.shape) << what;
  double worst = 0;
  int64_t bad = 0, firstBad = -1;
  for (int64_t i = 0; i < expected.numel() && i < actual.numel(); ++i) {
    double a = valueAt(actual, i), e = valueAt(expected, i), diff = std::fabs(a - e);
    const double allowed = atol + rtol * std::fabs(e) + (magnitude ? mtol * std::fabs(valueAt(*magnitude, i)) : 0.0);
    if (!(diff <= allowed)) {
      if (firstBad < 0) firstBad = i;
      ++bad;
    }
    if (std::isnan(diff) || diff > worst) worst = std::isnan(diff) ? INFINITY : diff;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << expected.numel()
                    << " elements differ; first at " << firstBad << " ("
                    << (firstBad >= 0 ? valueAt(actual, firstBad) : 0) << " vs "
                    << (firstBad >= 0 ? valueAt(expected, firstBad) : 0) << "), max |diff| "
                    << worst;
  return worst;
}

// `a` converted to `dtype` (through double).
inline Array convertArray(const Array& a, DType dtype) {
  Array b = Array::zeros(dtype, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = valueAt(a, i);
    if (dtype == DType::f32) b.values<float>()[i] = float(v);
    else if (dtype == DType::f64) b.values<double>()[i] = v;
    else if (dtype == DType::bf16) b.values<bf16>()[i] = toBf16(float(v));
    else b.values<int32_t>()[i] = int32_t(v);
  }
  return b;
}

// A deep copy (Arrays share storage when copied).
inline Array cloneArray(const Array& a) {
  Array b = Array::zeros(a.dtype, a.shape);
  if (a.bytes()) std::memcpy(b.data(), a.data(), a.bytes());
  return b;
}

// [0, 1, ..., rank - 1]: the axes that reduce a tensor to a scalar.
inline std::vector<int64_t> allAxes(const Tensor& t) {
  std::vector<int64_t> axes(t.rank());
  for (int64_t i = 0; i < t.rank(); ++i) axes[i] = i;
  return axes;
}

// The whole file as bytes (empty if it cannot be read).
inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Same dtype, shape and bytes (memcmp), with `what` in the failure.
inline void expectSameBits(const Array& actual, const Array& expected, const std::string& what) {
  ASSERT_EQ(actual.bytes(), expected.bytes()) << what;
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.bytes()), 0) << what;
}

// Every tensor of `actual` against the same-named tensor of `expected`.
inline void expectSameBits(const Tree& actual, const Tree& expected, const std::string& what) {
  for (const auto& [name, t] : actual) expectSameBits(t.array(), expected.at(name).array(), what + " " + name);
}

// The outputs of bench::trainStep (new params, optimizer state, BN state, loss), bit for bit.
template <typename Outputs>
void expectSameTrainStepBits(const Outputs& a, const Outputs& b) {
  expectSameBits(std::get<0>(a), std::get<0>(b), "param");
  expectSameBits(std::get<1>(a), std::get<1>(b), "momentum");
  expectSameBits(std::get<2>(a), std::get<2>(b), "bn state");
  expectSameBits(std::get<3>(a).array(), std::get<3>(b).array(), "loss");
}

// A directory of the test's own under the temporary directory (unique to the process and the
// object, so parallel ctest runs, the drift reruns and the sanitizer builds never share a file),
// removed with what is in it when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) ADD_FAILURE() << "cannot create a directory like " << pattern << ": " << std::strerror(errno);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct CommandRun {
  int status;
  std::string output;  // stdout and stderr
};

// Runs a shell command; its exit status and its stdout and stderr together (status -1 and why
// where no shell could start).
inline CommandRun runCommand(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "cannot start a shell for '" + command + "': " + std::strerror(errno)};
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

#ifdef SPMD_RUN_PATH  // the test binaries that run spmd-run (not the sanitizers' subsets)
// spmd-run: beside the running test binary where it is there (the GPU bundle's bin/), else
// where this build put it.
inline std::string spmdRunPath() {
  std::error_code error;
  const std::filesystem::path beside = std::filesystem::read_symlink("/proc/self/exe", error).parent_path() / "spmd-run";
  if (!error && std::filesystem::exists(beside, error)) return beside.string();
  return SPMD_RUN_PATH;
}
#endif

}  // namespace spmd::testing
