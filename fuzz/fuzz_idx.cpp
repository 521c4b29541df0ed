// libFuzzer target: the Fashion-MNIST IDX reader (gzip or plain) on arbitrary images and labels
// files. Any input must load or throw spmd::Error; nothing else (crash, hang, huge allocation).
#include "frontend/data/FashionMnist.h"
#include "fuzz/FuzzInput.h"
#include "runtime/base/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t half = size / 2;  // first half: the images file, second half: the labels file
  spmd::fuzz::writeInput("train-images-idx3-ubyte.gz", data, half);
  spmd::fuzz::writeInput("train-labels-idx1-ubyte.gz", data + half, size - half);
  try {
    spmd::data::loadFashionMnist("train", 0, spmd::fuzz::scratchDir().string());
  } catch (const spmd::Error&) {
  }
  return 0;
}
