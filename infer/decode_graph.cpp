#include "infer/decode_graph.h"

#include "core/error.h"

#ifdef DELTATRON_HAVE_CUDA
#include <cuda_runtime.h>

#define DT_GRAPH_CHECK(call, what)                                                                            \
  do {                                                                                                        \
    cudaError_t err_ = (call);                                                                                \
    DT_CHECK(err_ == cudaSuccess, "decode graph: {} failed: CUDA error {} ({}); run without the graph "     \
             "(generate --no-cuda-graph) to see which op is not capturable", what, static_cast<int>(err_),   \
             cudaGetErrorString(err_));                                                                       \
  } while (0)
#endif

namespace dt {

#ifdef DELTATRON_HAVE_CUDA

struct DecodeGraph::Impl {
  cudaGraphExec_t exec = nullptr;
};

DecodeGraph::DecodeGraph() : impl_(std::make_unique<Impl>()) {}

DecodeGraph::~DecodeGraph() { reset(); }

void DecodeGraph::reset() {
  if (impl_->exec) cudaGraphExecDestroy(impl_->exec);
  impl_->exec = nullptr;
}

bool DecodeGraph::ready() const { return impl_->exec != nullptr; }

void DecodeGraph::capture(Context& ctx, const std::function<void()>& body) {
  DT_CHECK(ctx.device == Device::kCUDA && ctx.stream, "decode graph: capture needs a CUDA context with a stream");
  reset();
  auto stream = static_cast<cudaStream_t>(ctx.stream);
  DT_GRAPH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // leaves the stream out of capture mode
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the capture's error, if any, is not the caller's
    throw;
  }
  DT_GRAPH_CHECK(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture (an op of the step is not capturable)");
  const cudaError_t err = cudaGraphInstantiate(&impl_->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) impl_->exec = nullptr;
  DT_GRAPH_CHECK(err, "cudaGraphInstantiate");
}

void DecodeGraph::replay(Context& ctx) {
  DT_CHECK(ready(), "decode graph: replay before capture");
  DT_GRAPH_CHECK(cudaGraphLaunch(impl_->exec, static_cast<cudaStream_t>(ctx.stream)), "cudaGraphLaunch");
}

#else

struct DecodeGraph::Impl {};

DecodeGraph::DecodeGraph() : impl_(std::make_unique<Impl>()) {}
DecodeGraph::~DecodeGraph() = default;
void DecodeGraph::reset() {}
bool DecodeGraph::ready() const { return false; }

void DecodeGraph::capture(Context& ctx, const std::function<void()>& body) {
  (void)ctx, (void)body;
  DT_FAIL("decode graph: this build has no CUDA backend (nvcc was not found at configure time)");
}

void DecodeGraph::replay(Context& ctx) {
  (void)ctx;
  DT_FAIL("decode graph: this build has no CUDA backend");
}

#endif

}  // namespace dt
