// CudaDevice's graphs: stream capture into a CUDA graph, instantiated once and launched with
// cudaGraphLaunch. A capture records without running, as the simulator's does; dropping the
// nodes after a mark (end(keep)) is how a step that synchronises with the host leaves the graph.
#include <algorithm>

#include "runtime/cuda/Cuda.h"

namespace spmd::runtime {

using cuda::check;

namespace {

struct CudaGraph final : Graph {
  cudaGraphExec_t exec = nullptr;
  size_t nodes = 0;
  // The device's scratch memory when the graph was captured (its nodes hold that address): a
  // later, larger workspace replaces the device's, and this one lives until the graph is gone.
  std::shared_ptr<std::byte> workspace;
  ~CudaGraph() override {
    if (exec) cudaGraphExecDestroy(exec);
  }
  size_t launches() const override { return nodes; }
};

cudaStream_t native(void* stream) { return static_cast<cudaStream_t>(stream); }

// The nodes of the graph `stream` is capturing.
std::vector<cudaGraphNode_t> capturedNodes(cudaStream_t stream, const std::string& device) {
  cudaStreamCaptureStatus status;
  cudaGraph_t graph = nullptr;
  check(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph), "capture query on " + device);
  if (status != cudaStreamCaptureStatusActive) throw Error(device + ": no graph is being captured");
  size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "graph query on " + device);
  std::vector<cudaGraphNode_t> nodes(count);
  if (count) check(cudaGraphGetNodes(graph, nodes.data(), &count), "graph query on " + device);
  nodes.resize(count);
  return nodes;
}

}  // namespace

void CudaDevice::refuseWhileCapturing(const std::string& what) const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(native(stream_), &status), "capture query on " + name());
  if (status != cudaStreamCaptureStatusNone)
    throw CaptureBroken(name() + ": " + what + " while capturing a graph, which a graph cannot hold");
}

void CudaDevice::begin() {
  check(cudaSetDevice(index_), "cudaSetDevice");
  marked_.clear();
  check(cudaStreamBeginCapture(native(stream_), cudaStreamCaptureModeThreadLocal), "graph capture begin on " + name());
}

size_t CudaDevice::recorded() const {
  std::vector<cudaGraphNode_t> nodes = capturedNodes(native(stream_), name());
  marked_.assign(nodes.begin(), nodes.end());
  return nodes.size();
}

std::shared_ptr<const Graph> CudaDevice::end(size_t keep) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(native(stream_), &graph), "graph capture end on " + name());
  auto result = std::make_shared<CudaGraph>();
  size_t count = 0;
  check(cudaGraphGetNodes(graph, nullptr, &count), "graph query on " + name());
  std::vector<cudaGraphNode_t> nodes(count);
  if (count) check(cudaGraphGetNodes(graph, nodes.data(), &count), "graph query on " + name());
  if (keep < count) {
    // Only the mark recorded() left can be kept: the nodes captured before it.
    if (keep > 0 && keep != marked_.size()) {
      cudaGraphDestroy(graph);
      throw Error(name() + ": a graph can keep the nodes up to its last mark (" + std::to_string(marked_.size()) +
                  "), not " + std::to_string(keep));
    }
    std::sort(marked_.begin(), marked_.end());
    for (cudaGraphNode_t node : nodes)
      if (keep == 0 || !std::binary_search(marked_.begin(), marked_.end(), static_cast<void*>(node)))
        if (cudaGraphDestroyNode(node) != cudaSuccess) {
          // A graph holding memory allocation nodes (cuDNN or cuBLAS allocating in the capture)
          // refuses deletions: none of it is kept, and the caller runs the work outside.
          cudaGetLastError();
          cudaGraphDestroy(graph);
          marked_.clear();
          throw CaptureBroken(name() + ": the graph cannot drop its last nodes");
        }
    count = keep;
  }
  marked_.clear();
  result->nodes = count;
  result->workspace = workspace_;
  if (count) {
    cudaError_t made = cudaGraphInstantiate(&result->exec, graph, 0);
    cudaGraphDestroy(graph);
    check(made, "graph instantiation on " + name());
  } else {
    cudaGraphDestroy(graph);
  }
  return result;
}

void CudaDevice::launch(const Graph& graph) {
  const auto& cudaGraph = static_cast<const CudaGraph&>(graph);
  if (cudaGraph.exec) check(cudaGraphLaunch(cudaGraph.exec, native(stream_)), "graph launch on " + name());
}

}  // namespace spmd::runtime
