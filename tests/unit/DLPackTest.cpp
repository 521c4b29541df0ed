// DLPack in and out of host Arrays (frontend/io/DLPack.h): zero-copy both ways (the same data
// pointer), the dtypes round-trip, the producer's deleter runs exactly once when the last Array
// using its memory is gone (ASan sees any use after that), and misuse is refused without
// consuming the tensor. CUDA memory goes out and in place on a GPU (run by the GPU report).
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "TestUtil.h"
#include "frontend/io/DLPack.h"
#include "frontend/spmd.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/DeviceArray.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;

// A producer's tensor over malloc'ed memory: its deleter frees it and counts the calls.
struct Produced {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  std::byte* base = nullptr;  // what malloc gave
  int* deleted = nullptr;
};

DLManagedTensor* produce(DLDataType dtype, std::vector<int64_t> shape, int* deleted, std::vector<int64_t> strides = {},
                         DLDeviceType device = kDLCPU, size_t misalign = 0) {
  auto* p = new Produced;
  p->shape = std::move(shape), p->strides = std::move(strides), p->deleted = deleted;
  int64_t n = 1;
  for (int64_t d : p->shape) n *= d;
  auto* bytes = p->base = static_cast<std::byte*>(std::malloc(size_t(n) * dtype.bits / 8 + 16));
  for (int64_t i = 0; i < n * dtype.bits / 8; ++i) bytes[i + int64_t(misalign)] = std::byte(i * 7);
  p->managed.dl_tensor = {bytes + misalign, {device, 0}, int32_t(p->shape.size()), dtype, p->shape.data(),
                          p->strides.empty() ? nullptr : p->strides.data(), 0};
  p->managed.manager_ctx = p;
  p->managed.deleter = [](DLManagedTensor* self) {
    auto* p = static_cast<Produced*>(self->manager_ctx);
    std::free(p->base);
    ++*p->deleted;
    delete p;
  };
  return &p->managed;
}

TEST(DLPackTest, ExportSharesTheArraysBytesUntilTheConsumerDeletesIt) {
  Array a = randomArray(DType::f32, {2, 3}, 1);
  const float first = a.values<float>()[0];
  DLManagedTensor* m = io::toDLPack(a);
  EXPECT_EQ(m->dl_tensor.data, a.data());
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[0], 2);
  EXPECT_EQ(m->dl_tensor.shape[1], 3);
  EXPECT_EQ(m->dl_tensor.strides, nullptr);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 32);
  a.values<float>()[1] = 42.f;  // one memory: seen through the tensor
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[1], 42.f);
  a = Array();  // the Array goes; the tensor keeps its bytes
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[0], first);
  m->deleter(m);
}

TEST(DLPackTest, ImportReadsTheProducersMemoryAndDeletesItOnceWhenTheLastViewGoes) {
  int deleted = 0;
  DLManagedTensor* m = produce({kDLFloat, 32, 1}, {4, 2}, &deleted);
  void* data = m->dl_tensor.data;
  Array a = io::fromDLPack(m);
  EXPECT_EQ(static_cast<void*>(a.data()), data);
  EXPECT_EQ(a.shape, (Shape{4, 2}));
  Array row = Array::view(a, 8, {2});  // a view keeps the memory too
  a = Array();
  EXPECT_EQ(deleted, 0);
  EXPECT_EQ(static_cast<void*>(row.data()), static_cast<std::byte*>(data) + 8);
  // The imported memory feeds a compiled function in place of a copy of it.
  Array doubled = jit([](const Tensor& x) { return x * 2.0; })(row).array();
  EXPECT_EQ(doubled.values<float>()[1], 2 * row.values<float>()[1]);
  row = Array();
  EXPECT_EQ(deleted, 1);
}

// Every dtype through toDLPack and back: the same pointer and values; strides that are
// row-major (size-1 dimensions aside) are taken.
TEST(DLPackTest, DtypesRoundTripWithoutACopy) {
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::i32}) {
    SCOPED_TRACE(dtypeName(dtype));
    Array a = randomArray(dtype, {3, 1, 5}, 2);
    Array back = io::fromDLPack(io::toDLPack(a));
    EXPECT_EQ(back.data(), a.data());
    EXPECT_EQ(back.dtype, dtype);
    EXPECT_EQ(back.shape, a.shape);
  }
  int deleted = 0;
  Array strided = io::fromDLPack(produce({kDLInt, 32, 1}, {3, 1, 5}, &deleted, {5, 99, 1}));
  EXPECT_EQ(strided.shape, (Shape{3, 1, 5}));
  strided = Array();
  EXPECT_EQ(deleted, 1);
}

// A value replicated on cpu devices goes out in place (replica 0's buffer) and can then not be
// donated (the call would write into what the consumer reads; undonated it still runs); a value
// split over the replicas is put together on the host first (a copy).
TEST(DLPackTest, DeviceResidentValuesOnCpuGoOutInPlace) {
  auto step = pmap([](const Tensor& w, const Tensor& x) { return std::tuple{w * 2.0, x + 1.0}; },
                   {.inAxes = {replicated, 0}, .outAxes = {replicated, 0}, .devices = "cpu:2"});
  Array w = randomArray(DType::f32, {3}, 1), x = randomArray(DType::f32, {2, 3}, 2);
  auto [doubled, shifted] = step(w, x);
  ASSERT_TRUE(doubled.onDevices());
  DLManagedTensor* m = io::toDLPack(doubled);
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(doubled.resident()->buffer(0).get()));
  ASSERT_EQ(m->dl_tensor.ndim, 1);
  EXPECT_EQ(m->dl_tensor.shape[0], 3);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[i], w.values<float>()[i] * 2.0f);
  auto donating = pmap([](const Tensor& v) { return v * 3.0; },
                       {.inAxes = {replicated}, .devices = "cpu:2", .name = "donating", .donateArguments = {0}});
  const std::string refused = errorOf([&] { donating(doubled); });
  EXPECT_NE(refused.find("f32[3] on cpu:0, cpu:1 (replicated) was lent to a DLPack consumer without a copy, so "),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("cannot write into its buffers (donateArguments): do not donate it"), std::string::npos) << refused;
  auto keeping = pmap([](const Tensor& v) { return v * 3.0; }, {.inAxes = {replicated}, .devices = "cpu:2"});
  EXPECT_EQ(keeping(doubled).array().values<float>()[2], w.values<float>()[2] * 2.0f * 3.0f);
  EXPECT_EQ(static_cast<float*>(m->dl_tensor.data)[2], w.values<float>()[2] * 2.0f);  // unchanged
  m->deleter(m);
  DLManagedTensor* parts = io::toDLPack(shifted);
  EXPECT_NE(parts->dl_tensor.data, static_cast<void*>(shifted.resident()->buffer(0).get()));
  ASSERT_EQ(parts->dl_tensor.ndim, 2);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float*>(parts->dl_tensor.data)[i], x.values<float>()[i] + 1.0f);
  parts->deleter(parts);
}

TEST(DLPackTest, MisuseIsRefusedAndLeavesTheTensorToTheCaller) {
  int deleted = 0;
  // `m` refused by `import` (fromDLPack, or tensorFromDLPack with onDevices) with `expected`, and not consumed.
  auto refusedBy = [&](bool onDevices, DLManagedTensor* m, const std::string& expected) {
    const std::string error = errorOf([&] { onDevices ? (void)io::tensorFromDLPack(m) : (void)io::fromDLPack(m); });
    EXPECT_NE(error.find(expected), std::string::npos) << error;
    EXPECT_EQ(deleted, 0) << "a refused tensor is not consumed";
    m->deleter(m);
    deleted = 0;
  };
  auto refused = [&](DLManagedTensor* m, const std::string& expected) { refusedBy(false, m, expected); };
  refused(produce({kDLFloat, 32, 1}, {2}, &deleted, {}, kDLCUDA), "lives on CUDA device 0, not in host memory");
  refused(produce({kDLFloat, 32, 1}, {2, 3}, &deleted, {1, 2}),
          "a tensor of shape [2, 3] with strides [1, 2] (in elements) is not row-major contiguous");
  refused(produce({kDLUInt, 8, 1}, {4}, &deleted), "a tensor of uint8 has no spmd dtype");
  refused(produce({kDLFloat, 32, 1}, {4}, &deleted, {}, kDLCPU, 2), "not aligned to its 4-byte elements");
  EXPECT_NE(errorOf([] { io::fromDLPack(nullptr); }).find("the tensor is null"), std::string::npos);
  auto refusedOnDevices = [&](DLManagedTensor* m, const std::string& expected) { refusedBy(true, m, expected); };
  DLManagedTensor* absent = produce({kDLFloat, 32, 1}, {2}, &deleted, {}, kDLCUDA);
  absent->dl_tensor.device.device_id = 63;  // no machine has it
  refusedOnDevices(absent, "tensorFromDLPack: the tensor lives on CUDA device 63, which this process cannot use: ");
  refusedOnDevices(produce({kDLFloat, 32, 1}, {2}, &deleted, {}, kDLROCM), "lives on ROCm device 0, which spmd does not run on");
  refusedOnDevices(produce({kDLFloat, 32, 1}, {2, 3}, &deleted, {1, 2}, kDLCUDA), "tensorFromDLPack: a tensor of shape [2, 3] with strides");
  EXPECT_NE(errorOf([] { io::tensorFromDLPack(nullptr); }).find("the tensor is null"), std::string::npos);
}

// Host memory through tensorFromDLPack: a Tensor over the producer's bytes (no copy), deleted
// once when the last use is gone.
TEST(DLPackTest, TensorFromHostMemoryIsTheProducersBytes) {
  int deleted = 0;
  DLManagedTensor* m = produce({kDLFloat, 32, 1}, {2, 2}, &deleted);
  void* data = m->dl_tensor.data;
  {
    Tensor t = io::tensorFromDLPack(m);
    EXPECT_FALSE(t.onDevices());
    EXPECT_EQ(static_cast<void*>(t.array().data()), data);
    EXPECT_EQ(deleted, 0);
  }
  EXPECT_EQ(deleted, 1);
}

// On a GPU (skipped without one; the GPU report runs it): a value replicated on cuda:0 goes out
// as kDLCUDA at replica 0's device pointer; taken back in it is a value on cuda:0 whose call binds
// it in place (no copy), reads the same values, and outlives the value it came from.
TEST(DLPackTest, CudaValuesGoOutAndComeBackInPlace) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  Array w = randomArray(DType::f32, {1000}, 3);
  Tensor doubled =
      pmap([](const Tensor& v) { return v * 2.0; }, {.inAxes = {replicated}, .outAxes = {replicated}, .devices = "cuda:0"})(w);
  ASSERT_TRUE(doubled.onDevices());
  DLManagedTensor* m = io::toDLPack(doubled);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, 0);
  EXPECT_EQ(m->dl_tensor.data, static_cast<void*>(doubled.resident()->buffer(0).get()));
  Tensor back = io::tensorFromDLPack(m);
  ASSERT_TRUE(back.onDevices());
  EXPECT_EQ(static_cast<void*>(back.resident()->buffer(0).get()), static_cast<void*>(doubled.resident()->buffer(0).get()));
  doubled = Tensor();  // the exported memory stays alive in `back`
  auto tripled =
      pmap([](const Tensor& v) { return v * 3.0; }, {.inAxes = {replicated}, .outAxes = {replicated}, .devices = "cuda:0"});
  Array six = tripled(back).array();
  EXPECT_EQ(tripled.lastCall().argumentsInPlace, 1);
  Array two = back.array();
  for (int64_t i = 0; i < w.numel(); ++i) {
    EXPECT_EQ(two.values<float>()[i], w.values<float>()[i] * 2.0f) << i;
    EXPECT_EQ(six.values<float>()[i], w.values<float>()[i] * 2.0f * 3.0f) << i;
  }
}

}  // namespace
}  // namespace spmd
