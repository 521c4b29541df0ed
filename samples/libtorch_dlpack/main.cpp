// LibTorch and spmd on the same memory (DLPack, frontend/io/DLPack.h): a batch and weights made by
// LibTorch go into an spmd jit step without a copy, the step's loss gradient comes back to LibTorch
// without a copy, and LibTorch's own autograd checks it. Prints the addresses each side saw and the
// largest difference; exits 1 when an address or a value disagrees.
//
//   build/samples/libtorch_dlpack/libtorch_dlpack
#include <ATen/ATen.h>
#include <ATen/DLConvertor.h>

#include <cmath>
#include <cstdio>

#include "frontend/io/DLPack.h"
#include "frontend/spmd.h"

int main() {
  using spmd::Tensor;
  at::manual_seed(0);
  const at::Tensor x = at::randn({64, 16}, at::kFloat), w = at::randn({16, 4}, at::kFloat);

  // LibTorch -> spmd: the Arrays read LibTorch's storage in place (each keeps it alive).
  const spmd::Array xs = spmd::io::fromDLPack(at::toDLPack(x)), ws = spmd::io::fromDLPack(at::toDLPack(w));
  const bool inPlace = xs.data() == x.data_ptr() && ws.data() == w.data_ptr();

  // The step: mean(softsign(x w)^2) and its gradient in w.
  auto step = spmd::jit([](const Tensor& wv, const Tensor& xv) {
    return spmd::value_and_grad([&](const Tensor& p) {
      const Tensor z = spmd::matmul(xv, p), s = z / (spmd::abs(z) + 1.0);
      return spmd::mean(s * s, {0, 1});
    })(wv);
  });
  auto [loss, grad] = step(Tensor(ws), Tensor(xs));

  // spmd -> LibTorch: the gradient's bytes, in place.
  const spmd::Array g = grad.array();
  const at::Tensor back = at::fromDLPack(spmd::io::toDLPack(g));
  const bool outInPlace = back.data_ptr() == static_cast<void*>(g.data());

  // LibTorch's autograd on the same formula.
  at::Tensor wt = w.clone().requires_grad_(true);
  const at::Tensor z = x.mm(wt), s = z / (z.abs() + 1);
  const at::Tensor reference = s.pow(2).mean();
  reference.backward();
  const double lossDifference = std::abs(double(reference.item<float>()) - double(loss.array().values<float>()[0]));
  const double gradDifference = (back - wt.grad()).abs().max().item<float>();

  std::printf("libtorch_dlpack: LibTorch -> spmd %s, spmd -> LibTorch %s; loss %.7f (LibTorch %.7f), "
              "largest gradient difference %.3g\n",
              inPlace ? "in place" : "COPIED", outInPlace ? "in place" : "COPIED", double(loss.array().values<float>()[0]),
              double(reference.item<float>()), gradDifference);
  const bool ok = inPlace && outInPlace && lossDifference <= 1e-6 && gradDifference <= 1e-6;
  if (!ok) std::fprintf(stderr, "libtorch_dlpack: FAILED (want both ways in place, differences <= 1e-6)\n");
  return ok ? 0 : 1;
}
