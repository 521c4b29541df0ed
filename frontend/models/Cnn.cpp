// The seeds' small CNNs (the Flax CNN, d2l's multi-GPU LeNet) as Sequentials of spmd layers.
#include "frontend/models/Cnn.h"

namespace spmd::models {

std::unique_ptr<nn::Sequential> cnn(const CnnConfig& c) {
  if (c.imageSize % 4 != 0 || c.imageSize < 4)
    throw Error("models::cnn: imageSize " + std::to_string(c.imageSize) +
                " must be a positive multiple of 4 (two 2x2 average pools)");
  auto net = std::make_unique<nn::Sequential>("");
  const Pool2dOptions half = {.window = {2, 2}, .stride = {2, 2}};
  net->addNamed<nn::Conv2d>("conv1", nn::Conv2dConfig{.in = c.inChannels, .out = c.channels1, .kernel = 3,
                                                      .padding = 1, .weightInit = init::lecunNormal()});
  net->addNamed<nn::ReLU>("relu1");
  net->addNamed<nn::AvgPool2d>("pool1", half);
  net->addNamed<nn::Conv2d>("conv2", nn::Conv2dConfig{.in = c.channels1, .out = c.channels2, .kernel = 3,
                                                      .padding = 1, .weightInit = init::lecunNormal()});
  net->addNamed<nn::ReLU>("relu2");
  net->addNamed<nn::AvgPool2d>("pool2", half);
  net->addNamed<nn::Flatten>("flatten");
  int64_t side = c.imageSize / 4;
  net->addNamed<nn::Linear>("fc1", c.channels2 * side * side, c.hidden, init::lecunNormal());
  net->addNamed<nn::ReLU>("relu3");
  net->addNamed<nn::Linear>("fc2", c.hidden, c.numClasses, init::lecunNormal());
  net->addNamed<nn::LogSoftmax>("log_softmax");
  return net;
}

std::unique_ptr<nn::Sequential> lenet(int64_t numClasses) {
  auto net = std::make_unique<nn::Sequential>("");
  const Pool2dOptions half = {.window = {2, 2}, .stride = {2, 2}};
  net->addNamed<nn::Conv2d>("conv1", nn::Conv2dConfig{.in = 1, .out = 20, .kernel = 3});
  net->addNamed<nn::ReLU>("relu1");
  net->addNamed<nn::AvgPool2d>("pool1", half);
  net->addNamed<nn::Conv2d>("conv2", nn::Conv2dConfig{.in = 20, .out = 50, .kernel = 5});
  net->addNamed<nn::ReLU>("relu2");
  net->addNamed<nn::AvgPool2d>("pool2", half);
  net->addNamed<nn::Flatten>("flatten");
  net->addNamed<nn::Linear>("fc1", 800, 128);
  net->addNamed<nn::ReLU>("relu3");
  net->addNamed<nn::Linear>("fc2", 128, numClasses);
  return net;
}

}  // namespace spmd::models
