// Shared by the fuzz targets: the fuzzer's bytes as a file (the readers under test take paths),
// in a directory private to this process, removed when the process exits normally.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace spmd::fuzz {

inline std::filesystem::path scratchDir() {
  struct Scratch {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("spmd-fuzz-" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(path); }
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Scratch dir;
  return dir.path;
}

inline std::string writeInput(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = (scratchDir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return path;
}

}  // namespace spmd::fuzz
