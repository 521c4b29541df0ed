// hostKernel: prelude + the kernel's text + a launcher, compiled by spawning the host compiler
// (an argument vector, never a shell), written to the cache by rename, loaded with dlopen.
#include "runtime/sim/HostKernels.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/base/KernelCache.h"

extern char** environ;

namespace spmd::runtime::sim {
namespace {

// CUDA's builtins for one host thread. __CUDACC_RTC__ tells the embedded headers, as under
// NVRTC, to include nothing themselves; __CUDA_ARCH__ stays undefined, so the math is the host's.
constexpr const char* kPrelude = R"(// spmd: host build of a generated CUDA kernel (runtime/sim/HostKernels.cpp)
#include <cmath>
#include <cstring>
#define __CUDACC_RTC__ 1
#define __global__
#define __device__
#define __host__
namespace spmd_sim { struct Dim3 { unsigned x = 0, y = 1, z = 1; }; }
static thread_local spmd_sim::Dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
static inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
)";

std::string launcher(const std::string& name, int pointers, const std::string& byValue) {
  std::ostringstream os;
  os << "extern \"C\" void spmd_host_launch(void* const* p, long long n, long long blocks, int threads,\n"
     << "                                  const long long* blockOrder, const int* threadOrder) {\n"
     << "  blockDim.x = unsigned(threads), gridDim.x = unsigned(blocks);\n"
     << "  for (long long b = 0; b < blocks; ++b) {\n"
     << "    blockIdx.x = unsigned(blockOrder[b]);\n"
     << "    for (int t = 0; t < threads; ++t) {\n"
     << "      threadIdx.x = unsigned(threadOrder[t]);\n"
     << "      " << name << "(";
  if (!byValue.empty()) os << "*static_cast<const " << byValue << "*>(p[0]), ";
  for (int i = byValue.empty() ? 0 : 1; i < pointers; ++i) os << "static_cast<T*>(p[" << i << "]), ";
  os << "n);\n    }\n  }\n}\n";
  return os.str();
}

std::string compilerPath() {
  if (const char* cxx = std::getenv("SPMD_SIM_CXX"); cxx && *cxx) return cxx;
  return SPMD_HOST_CXX;
}

std::string readText(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Runs the compiler on `source` writing `object`; throws with its output when it fails.
void compile(const std::string& cxx, const std::filesystem::path& source, const std::filesystem::path& object,
             const std::filesystem::path& log) {
  std::vector<std::string> args = {cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-w",
                                   "-o", object.string(), source.string()};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, cxx.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw Error("sim: cannot start the host compiler '" + cxx + "' for a generated kernel: " + std::strerror(spawned) +
                "; install g++ or point SPMD_SIM_CXX at a C++17 compiler");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("sim: the host compiler '" + cxx + "' could not compile a generated kernel (" + source.string() +
                "):\n" + readText(log));
}

}  // namespace

HostLaunch hostKernel(const std::string& source, const std::string& name, int pointers, const std::string& byValue) {
  static std::mutex mutex;
  static std::map<std::string, HostLaunch> loaded;
  const std::string cxx = compilerPath();
  const std::string text = kPrelude + source + launcher(name, pointers, byValue);
  std::lock_guard lock(mutex);
  const std::string key = text + "\n// " + cxx;
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;

  std::ostringstream hash;
  hash << std::hex << std::hash<std::string>()(key);
  const std::filesystem::path dir = kernelCacheDir() / "host";
  const std::filesystem::path object = dir / (hash.str() + ".so");
  void* handle = std::filesystem::exists(object) ? dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!handle) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) throw Error("sim: cannot create the kernel cache " + dir.string() + ": " + error.message() + "; set SPMD_KERNEL_CACHE to a writable folder");
    const std::string unique = hash.str() + "." + std::to_string(::getpid());
    const std::filesystem::path src = dir / (unique + ".cpp"), temp = dir / (unique + ".so"), log = dir / (unique + ".log");
    std::ofstream(src) << text;
    compile(cxx, src, temp, log);
    std::filesystem::rename(temp, object, error);  // atomic: a concurrent process sees old or new
    std::filesystem::remove(src, error), std::filesystem::remove(log, error), std::filesystem::remove(temp, error);
    handle = dlopen(object.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw Error(std::string("sim: cannot load the host build of a generated kernel: ") + dlerror());
  }
  auto launch = reinterpret_cast<HostLaunch>(dlsym(handle, "spmd_host_launch"));
  if (!launch) throw Error("sim: " + object.string() + " has no spmd_host_launch; remove it and run again");
  return loaded[key] = launch;
}

}  // namespace spmd::runtime::sim
