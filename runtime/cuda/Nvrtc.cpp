// compileCuda: nvrtcCreateProgram / nvrtcCompileProgram / nvrtcGet{PTX,CUBIN}, with two caches.
#include "runtime/cuda/Nvrtc.h"

#include <nvrtc.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "runtime/base/Error.h"
#include "runtime/base/KernelCache.h"

namespace spmd::runtime::cuda {
namespace {

void checkNvrtc(nvrtcResult result, const char* what) {
  if (result != NVRTC_SUCCESS)
    throw Error(std::string("NVRTC ") + what + " failed: " + nvrtcGetErrorString(result));
}

}  // namespace

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  checkNvrtc(nvrtcVersion(&major, &minor), "version query");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string compileCuda(const std::string& source, const std::string& arch) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::string> memory;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::pair{source, arch};
  if (auto it = memory.find(key); it != memory.end()) return it->second;

  const bool ptx = arch.rfind("compute_", 0) == 0;
  std::ostringstream hash;
  hash << std::hex << std::hash<std::string>()(source + "\n" + arch + "\n" + nvrtcVersionString());
  std::filesystem::path file = kernelCacheDir() / (hash.str() + (ptx ? ".ptx" : ".cubin"));
  if (std::ifstream cached{file, std::ios::binary}) {
    std::string binary((std::istreambuf_iterator<char>(cached)), {});
    if (!binary.empty()) return memory[key] = binary;
  }

  nvrtcProgram program;
  checkNvrtc(nvrtcCreateProgram(&program, source.c_str(), "spmd_fused.cu", 0, nullptr, nullptr), "create");
  std::string archFlag = "--gpu-architecture=" + arch;
  const char* options[] = {archFlag.c_str(), "--std=c++17", "-default-device"};
  nvrtcResult compiled = nvrtcCompileProgram(program, 3, options);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  if (logSize) nvrtcGetProgramLog(program, log.data());
  if (compiled != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    throw Error("NVRTC could not compile a generated kernel for " + arch + ":\n" + log +
                "\nsource:\n" + source);
  }
  size_t size = 0;
  std::string binary;
  if (ptx) {
    checkNvrtc(nvrtcGetPTXSize(program, &size), "PTX size");
    binary.resize(size);
    checkNvrtc(nvrtcGetPTX(program, binary.data()), "PTX");
  } else {
    checkNvrtc(nvrtcGetCUBINSize(program, &size), "CUBIN size");
    binary.resize(size);
    checkNvrtc(nvrtcGetCUBIN(program, binary.data()), "CUBIN");
  }
  nvrtcDestroyProgram(&program);

  std::error_code ignored;  // the disk cache is an optimization: failing to write it is not an error
  std::filesystem::create_directories(file.parent_path(), ignored);
  std::filesystem::path temp = file;
  temp += ".tmp" + std::to_string(::getpid());  // one writer per process: the mutex above
  if (std::ofstream out{temp, std::ios::binary}; out.write(binary.data(), binary.size()))
    std::filesystem::rename(temp, file, ignored);
  std::filesystem::remove(temp, ignored);
  return memory[key] = binary;
}

}  // namespace spmd::runtime::cuda
