// resnet18_fashion_mnist: the seeds' experiment done with spmd. Trains ResNet-18 on
// Fashion-MNIST data-parallel over emulated CPU devices (and over processes under mpirun), evaluates it every epoch, writes
// metrics (CSV and a gnuplot PNG) and safetensors checkpoints, and resumes from them.
// See --help; README.md shows the default run and the seeds' configurations.
#include <cstdio>
#include <exception>
#include <new>
#include <optional>

#include "Flags.h"
#include "Train.h"
#include "runtime/base/Error.h"
#include "runtime/mpi/Processes.h"

int main(int argc, char** argv) {
  try {
    int status = 0;
    std::optional<sample::Flags> flags = sample::parseFlags(argc, argv, status);
    if (!flags) return status;
    sample::train(*flags);
    return 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "resnet18_fashion_mnist: error: out of host memory; lower --width, --batch "
                         "or --eval-batch, or use fewer --devices\n");
    return 1;
  } catch (const std::exception& e) {  // spmd::Error, and file-system errors on --out
    // In a job of several processes the others may wait in a collective: end them all.
    if (spmd::runtime::processes().size > 1) spmd::runtime::abortJob(std::string("resnet18_fashion_mnist: error: ") + e.what());
    std::fprintf(stderr, "resnet18_fashion_mnist: error: %s\n", e.what());
    return 1;
  }
}
