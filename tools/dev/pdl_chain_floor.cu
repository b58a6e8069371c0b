// The time a chain of kernels costs when they do almost nothing: K kernels recorded in one CUDA
// graph, each waiting for the one before (griddepcontrol.wait), reading the 768 floats it wrote and
// writing its own, with and without programmatic dependent launch, with one CTA an SM or four.
// It bounds what a decode step of K kernels can reach however fast each kernel's own work is
// (docs/inference.md, "Where a decode step's time goes").
//   nvcc -O2 -arch=sm_90a tools/dev/pdl_chain_floor.cu -o /tmp/pdl_chain_floor && /tmp/pdl_chain_floor [K]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));           \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// early: let the next kernel start right after the wait (as the decode kernels do); else at the end.
__global__ void __launch_bounds__(256, 4) link(const float* x, float* y, int n, int early) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (early) asm volatile("griddepcontrol.launch_dependents;");
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += 256) s += x[i];
  if (threadIdx.x == 0) y[blockIdx.x] = s;
  if (!early) asm volatile("griddepcontrol.launch_dependents;");
}

int main(int argc, char** argv) {
  const int K = argc > 1 ? std::atoi(argv[1]) : 70;  // the 124M hybrid's decode step
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float *a, *b;
  CHECK(cudaMalloc(&a, 1 << 20));
  CHECK(cudaMalloc(&b, 1 << 20));
  CHECK(cudaMemset(a, 0, 1 << 20));
  CHECK(cudaMemset(b, 0, 1 << 20));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("| PDL | next starts | CTAs | us per graph of %d | us per kernel |\n| --- | --- | --- | --- | --- |\n", K);
  for (int pdl = 0; pdl < 2; ++pdl)
    for (int early = 0; early < 2; ++early)
      for (int ctas : {sms, 4 * sms}) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int k = 0; k < K; ++k) {
          cudaLaunchAttribute attr[1];
          attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr[0].val.programmaticStreamSerializationAllowed = 1;
          const cudaLaunchConfig_t cfg = {dim3(ctas), dim3(256), 0, s, attr, static_cast<unsigned>(pdl)};
          CHECK(cudaLaunchKernelEx(&cfg, link, static_cast<const float*>(k % 2 ? b : a), k % 2 ? a : b, 768, early));
        }
        CHECK(cudaStreamEndCapture(s, &g));
        CHECK(cudaGraphInstantiate(&ge, g, 0));
        for (int i = 0; i < 20; ++i) CHECK(cudaGraphLaunch(ge, s));
        cudaEvent_t e0, e1;
        CHECK(cudaEventCreate(&e0));
        CHECK(cudaEventCreate(&e1));
        const int R = 200;
        CHECK(cudaEventRecord(e0, s));
        for (int i = 0; i < R; ++i) CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0.f;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        std::printf("| %s | %s | %d | %.1f | %.2f |\n", pdl ? "yes" : "no", early ? "after the wait" : "at the end", ctas,
                    ms * 1000 / R, ms * 1000 / R / K);
        CHECK(cudaGraphExecDestroy(ge));
        CHECK(cudaGraphDestroy(g));
      }
  return 0;
}
