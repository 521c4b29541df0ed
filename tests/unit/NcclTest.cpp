// NCCL for cuda replicas (runtime/cuda/Nccl.h). Without a GPU (CI): the build links NCCL and
// reads its version, and the choice between NCCL and the pointer exchange is checked for every
// kind of device list. With a GPU: NCCL ranks on the visible GPUs (one per GPU; one rank when
// only one is visible) run the exact and fast all-reduce of f32, f64 and i32 and the all-gather;
// the exact mode gives the bits of the host fold in rank order (runtime/device/Fold.h), fast
// mode the same within rounding. GPU tests skip, saying why, when no GPU is seen.
#include <gtest/gtest.h>

#if SPMD_WITH_CUDA && SPMD_WITH_NCCL
#include <cuda_runtime.h>

#include <cstdlib>
#include <thread>

#include "runtime/cuda/Nccl.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Fold.h"
#include "runtime/device/InProcessCommunicator.h"

namespace spmd::runtime {
namespace {

DeviceList cudaList(std::vector<int> gpus, std::string spec) { return DeviceList{"cuda", std::move(gpus), std::move(spec)}; }

TEST(Nccl, BuildLinksNcclAndReadsItsVersion) {
  std::string why;
  std::string version = ncclVersion(&why);
  ASSERT_FALSE(version.empty()) << why;
  EXPECT_EQ(version.rfind("2.", 0), 0u) << "NCCL " << version;
}

TEST(Nccl, UsedForDistinctGpusAndAcrossProcessesOnly) {
  std::string why;
  EXPECT_TRUE(useNccl(cudaList({0, 1}, "cuda:0,1"), 1, &why)) << why;
  EXPECT_NE(why.find("2 GPUs of this process"), std::string::npos) << why;
  EXPECT_TRUE(useNccl(cudaList({0}, "cuda:0"), 2, &why)) << why;
  EXPECT_NE(why.find("across 2 processes"), std::string::npos) << why;
  EXPECT_FALSE(useNccl(cudaList({0, 0}, "cuda:0*2"), 1, &why));
  EXPECT_NE(why.find("share a GPU"), std::string::npos) << why;
  EXPECT_FALSE(useNccl(cudaList({0, 0}, "cuda:0*2"), 2, &why));
  EXPECT_NE(why.find("not possible across processes"), std::string::npos) << why;
  EXPECT_FALSE(useNccl(cudaList({0}, "cuda:0"), 1, &why));
  EXPECT_FALSE(useNccl(DeviceList{"cpu", {0, 1}, "cpu:2"}, 2, &why));
}

// NCCL ranks on every visible GPU of this process (`SPMD_REDUCE` as the test sets it).
struct Ranks {
  std::vector<int> gpus;
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<cudaStream_t> streams;
  ~Ranks() {
    for (size_t r = 0; r < streams.size(); ++r) {
      cudaSetDevice(gpus[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
};

std::unique_ptr<Ranks> makeRanks(std::string* skip) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    *skip = "no GPU is visible, so NCCL cannot run here (the selection and version checks above ran)";
    return nullptr;
  }
  auto ranks = std::make_unique<Ranks>();
  std::string spec = "cuda:";
  for (int g = 0; g < count; ++g) ranks->gpus.push_back(g), spec += (g ? "," : "") + std::to_string(g);
  DeviceList list = cudaList(ranks->gpus, spec);
  auto group = std::make_shared<InProcessGroup>(count, std::chrono::seconds(30));
  std::vector<std::unique_ptr<Communicator>> host;
  for (int r = 0; r < count; ++r) host.push_back(std::make_unique<InProcessCommunicator>(group, r));
  ranks->comms = makeNcclCommunicators(list, std::move(host), Job::single(), std::chrono::seconds(30));
  for (int g : ranks->gpus) {
    cudaSetDevice(g);
    cudaStream_t s;
    cudaStreamCreate(&s);
    ranks->streams.push_back(s);
  }
  return ranks;
}

template <typename T>
std::vector<std::vector<T>> operands(int ranks, int64_t n) {
  std::vector<std::vector<T>> x(ranks, std::vector<T>(n));
  for (int r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < n; ++i) x[r][i] = T(((i * 37 + r * 101) % 199) - 99) / T(7);
  return x;
}

// Every rank's operand through the NCCL all-reduce on its GPU; returns each rank's result.
template <typename T>
std::vector<std::vector<T>> allReduce(Ranks& ranks, const std::vector<std::vector<T>>& in, DType dtype, Reduction op) {
  const int N = int(ranks.gpus.size());
  std::vector<std::vector<T>> out(N);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(N);
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      try {
        cudaSetDevice(ranks.gpus[r]);
        void* d = nullptr;
        size_t bytes = in[r].size() * sizeof(T);
        cudaMalloc(&d, std::max<size_t>(bytes, 1));
        cudaMemcpy(d, in[r].data(), bytes, cudaMemcpyHostToDevice);
        ranks.comms[r]->deviceCollectives()->allReduce(d, dtype, int64_t(in[r].size()), op, ranks.streams[r], "test all_reduce");
        out[r].resize(in[r].size());
        cudaMemcpy(out[r].data(), d, bytes, cudaMemcpyDeviceToHost);
        cudaFree(d);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < N; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

template <typename T>
std::vector<T> hostFold(const std::vector<std::vector<T>>& in, DType dtype, Reduction op) {
  std::vector<const void*> sources;
  for (const auto& v : in) sources.push_back(v.data());
  std::vector<T> out(in[0].size());
  foldTree(dtype, sources.data(), int(in.size()), 0, int64_t(out.size()), op, int(in.size()), out.data());
  return out;
}

template <typename T>
void checkExactAndFast(DType dtype) {
  for (const char* mode : {"exact", "fast"}) {
    setenv("SPMD_REDUCE", mode, 1);
    std::string skip;
    auto ranks = makeRanks(&skip);
    unsetenv("SPMD_REDUCE");
    if (!ranks) GTEST_SKIP() << skip;
    const int N = int(ranks->gpus.size());
    for (int64_t n : {int64_t(1), int64_t(N + 3), int64_t(100003)})
      for (Reduction op : {Reduction::Sum, Reduction::Mean, Reduction::Max}) {
        auto in = operands<T>(N, n);
        auto want = hostFold(in, dtype, op);
        auto got = allReduce(*ranks, in, dtype, op);
        for (int r = 0; r < N; ++r)
          for (int64_t i = 0; i < n; ++i) {
            if (std::string(mode) == "exact" || op == Reduction::Max) {
              ASSERT_EQ(got[r][i], want[i]) << mode << " rank " << r << " n " << n << " element " << i;
            } else {
              ASSERT_NEAR(double(got[r][i]), double(want[i]), 1e-5 * (1 + std::abs(double(want[i]))))
                  << mode << " rank " << r << " element " << i;
            }
          }
      }
  }
}

TEST(Nccl, AllReduceF32ExactIsTheHostFold) { checkExactAndFast<float>(DType::f32); }
TEST(Nccl, AllReduceF64ExactIsTheHostFold) { checkExactAndFast<double>(DType::f64); }

TEST(Nccl, AllGatherStacksRanksInOrder) {
  std::string skip;
  auto ranks = makeRanks(&skip);
  if (!ranks) GTEST_SKIP() << skip;
  const int N = int(ranks->gpus.size());
  const size_t bytes = 4099;
  std::vector<std::vector<unsigned char>> got(N);
  std::vector<std::thread> threads;
  for (int r = 0; r < N; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(ranks->gpus[r]);
      std::vector<unsigned char> mine(bytes);
      for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<unsigned char>(i * 3 + r * 17);
      void *in = nullptr, *out = nullptr;
      cudaMalloc(&in, bytes);
      cudaMalloc(&out, bytes * N);
      cudaMemcpy(in, mine.data(), bytes, cudaMemcpyHostToDevice);
      ranks->comms[r]->deviceCollectives()->allGather(in, out, bytes, ranks->streams[r], "test all_gather");
      got[r].resize(bytes * N);
      cudaMemcpy(got[r].data(), out, bytes * N, cudaMemcpyDeviceToHost);
      cudaFree(in);
      cudaFree(out);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < N; ++r)
    for (int s = 0; s < N; ++s)
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(got[r][s * bytes + i], static_cast<unsigned char>(i * 3 + s * 17)) << "rank " << r << " block " << s;
}

}  // namespace
}  // namespace spmd::runtime

#else
TEST(Nccl, NotInThisBuild) { GTEST_SKIP() << "this build has no CUDA backend with NCCL (nvcc or libnccl not found)"; }
#endif
