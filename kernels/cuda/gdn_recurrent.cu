// The gated delta rule token by token on the GPU: the decode step (one token, recurrent update of
// the cached state) and, for any T, a second reference for the chunked kernels. Per (b, h):
//   u_t = v_t - e^{g_t} S_{t-1}^T k_t                 (dv)
//   S_t = e^{g_t} S_{t-1} + beta_t k_t u_t^T          (dk x dv, fp32)
//   o_t = S_t^T q_t
// One CTA per (b, h, cols columns of S), cols = simt_state_cols(dv) (32, 16 or 8): the columns are
// independent. kThreads / cols threads per column share each length-dk dot product; their partial
// sums are added in a fixed order (deterministic). Head dims: multiples of 8 up to 128, dk != dv.
#include "kernels/cuda/gdn_chunk.cuh"

namespace dt::cuda {

namespace {

__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(GdnCudaForwardParams p) {
  const GdnCudaDims& d = p.dims;
  const int64_t dk = d.dk, dv = d.dv, b = blockIdx.z, h = blockIdx.y;
  const int cols = simt_state_cols(dv), lanes = kThreads / cols;  // lanes: threads per column
  const int64_t col0 = blockIdx.x * cols;
  const int64_t kh = h / (d.Hv / d.Hk);
  __shared__ float S[kMaxDim * kStateCols];
  __shared__ float sq[kMaxDim], sk[kMaxDim], sv[kStateCols], su[kStateCols];
  __shared__ float part[kThreads];
  const int yy = threadIdx.x % cols, lane = threadIdx.x / cols;  // column, and which slice of dk
  const int64_t state_off = (b * d.Hv + h) * dk * dv;
  load_state_cols(S, p.S0, state_off, dk, dv, cols, col0);
  for (int64_t t = 0; t < d.T; ++t) {
    const int64_t r = b * d.T + t;
    __syncthreads();  // S from the previous step (or the load) is complete; sq, sk, sv are free
    for (int64_t x = threadIdx.x; x < dk; x += blockDim.x) {
      sq[x] = ld_bf16(p.q + r * p.ld_q + kh * dk + x);
      sk[x] = ld_bf16(p.k + r * p.ld_k + kh * dk + x);
    }
    if (threadIdx.x < cols) sv[threadIdx.x] = ld_bf16(p.v + r * p.ld_v + h * dv + col0 + threadIdx.x);
    const float decay = expf(p.g[r * d.Hv + h]), beta = p.beta[r * d.Hv + h];
    __syncthreads();
    // u = v - e^g S^T k
    float acc = 0.f;
    for (int64_t x = lane; x < dk; x += lanes) acc += S[x * cols + yy] * sk[x];
    part[threadIdx.x] = acc;
    __syncthreads();
    if (lane == 0) {
      float s = 0.f;
      for (int l = 0; l < lanes; ++l) s += part[l * cols + yy];
      su[yy] = sv[yy] - decay * s;
    }
    __syncthreads();
    // S = e^g S + beta k u^T, then o = S^T q
    acc = 0.f;
    for (int64_t x = lane; x < dk; x += lanes) {
      const float s = decay * S[x * cols + yy] + beta * sk[x] * su[yy];
      S[x * cols + yy] = s;
      acc += s * sq[x];
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    if (lane == 0) {
      float s = 0.f;
      for (int l = 0; l < lanes; ++l) s += part[l * cols + yy];
      st_bf16(p.o + r * p.ld_o + h * dv + col0 + yy, s);
    }
  }
  __syncthreads();
  if (p.S_out) store_state_cols(p.S_out, S, state_off, dk, dv, cols, col0);
}

}  // namespace

}  // namespace dt::cuda

namespace dt {

using namespace cuda;

void gdn_recurrent_forward_cuda(const GdnCudaForwardParams& p, void* stream) {
  const char* op = "gdn_recurrent_forward_cuda";
  const GdnCudaDims& d = p.dims;
  DT_CHECK(d.B >= 1 && d.T >= 1 && d.Hk >= 1 && d.Hv % d.Hk == 0, "{}: bad sizes B={} T={} Hk={} Hv={}", op, d.B, d.T,
           d.Hk, d.Hv);
  DT_CHECK(d.dk >= kDimStep && d.dk <= kMaxDim && d.dk % kDimStep == 0 && d.dv >= kDimStep && d.dv <= kMaxDim &&
               d.dv % kDimStep == 0,
           "{}: head dims dk = {}, dv = {}: need multiples of {} up to {} (dk may differ from dv)", op, d.dk, d.dv,
           kDimStep, kMaxDim);
  DT_CHECK(p.q && p.k && p.v && p.o && p.g && p.beta, "{}: null tensor pointer", op);
  DT_CHECK(p.ld_q >= d.Hk * d.dk && p.ld_k >= d.Hk * d.dk && p.ld_v >= d.Hv * d.dv && p.ld_o >= d.Hv * d.dv,
           "{}: a row stride is smaller than a row", op);
  const dim3 grid(static_cast<unsigned>(d.dv / simt_state_cols(d.dv)), static_cast<unsigned>(d.Hv),
                  static_cast<unsigned>(d.B));
  gdn_recurrent_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace dt
