// The file exchange between the unit tests and their PyTorch references (tests/reference/,
// format in exchange.py): tensors and a manifest written to a fresh directory, the reference
// run by the system python3 that python3-torch installs, its results read back.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/base/Array.h"

namespace spmd::testing {

inline std::string interpreter() {
  const char* env = std::getenv("SPMD_PYTHON");
  return env ? env : "/usr/bin/python3";
}

// The command that runs a reference: the interpreter without oneDNN's ISA caps. The caps
// (ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA) are for spmd's kernels under test (CMake's drift_avx2);
// PyTorch's bundled oneDNN reads them too and, held to AVX2, has no bf16 convolution for
// torch.autocast, so the reference would fail rather than give the same results.
inline std::string python() { return "env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA " + interpreter(); }

// Empty when torch can be imported, else why not and how to fix it. The project's setup installs
// PyTorch, so a failed import fails the test rather than skipping it.
inline std::string torchMissing() {
  if (std::system((python() + " -c 'import torch' > /dev/null 2>&1").c_str()) == 0) return "";
  return "PyTorch is not importable by " + interpreter() +
         " (apt-get install python3-torch; scripts/setup.sh does); set SPMD_PYTHON to use another "
         "interpreter";
}

class Exchange {
 public:
  Exchange() : dir_(std::filesystem::temp_directory_path() /
                    ("spmd_torch_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    manifest_.open(dir_ / "manifest.txt");
  }
  ~Exchange() { std::filesystem::remove_all(dir_); }

  void write(const std::string& name, const Array& a) {
    manifest_ << name << " " << dtypeName(a.dtype);
    for (int64_t d : a.shape) manifest_ << " " << d;
    manifest_ << "\n";
    std::ofstream(dir_ / (name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(a.data()), static_cast<std::streamsize>(a.bytes()));
  }
  Array read(const std::string& name, const Shape& shape, DType dtype) {
    Array a = Array::zeros(dtype, shape);
    std::ifstream in(dir_ / (name + ".bin"), std::ios::binary);
    in.read(reinterpret_cast<char*>(a.data()), static_cast<std::streamsize>(a.bytes()));
    EXPECT_EQ(in.gcount(), static_cast<std::streamsize>(a.bytes())) << "short file " << name;
    return a;
  }
  void close() { manifest_.close(); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::ofstream manifest_;
};

}  // namespace spmd::testing
