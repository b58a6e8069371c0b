// Linear layer on the GPU through cuBLASLt (reference: kernels/cpu/linear.h), HF layout w[out, in]:
//   forward:  y[rows, out] = x[rows, in] w^T                  torch: y = x @ w.T
//   backward: dx[rows, in] = alpha dy w          (written)    torch: dx = alpha * dy @ w
//             dw[out, in] += alpha dy^T x        (beta = 1)   torch: dw += alpha * dy.T @ x
// bf16 operands, fp32 accumulation (CUBLAS_COMPUTE_32F) and fp32 alpha/beta; y is bf16 or fp32, dx bf16,
// dw fp32.
//
// cuBLASLt is column-major; a row-major [r, c] matrix is a column-major [c, r] one with ld = c, so:
//   forward:  y^T[out, rows]  = op_T(w: [in, out]) x^T[in, rows]         m = out, n = rows, k = in
//   dx:       dx^T[in, rows]  = w^T[in, out] dy^T[out, rows]              m = in,  n = rows, k = out
//   dw:       dw^T[in, out]  += x^T[in, rows] op_T(dy^T: [out, rows])     m = in,  n = out,  k = rows
// Each problem's descriptors and algorithm (the heuristic's first choice for the 32 MiB workspace) are
// made once and cached in the context (dense_mm_state.h): a shape always runs the same algorithm, so
// results are bitwise reproducible run to run.
#include "kernels/cuda/dense_mm_state.h"
#include "kernels/cuda_ops.h"

namespace dt::cuda {

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF32: return CUDA_R_32F;
    default: DT_FAIL("internal error: no cuBLASLt type for {}", dtype_name(t));
  }
}

// The largest power of two up to 16 that divides the address (cuBLASLt's alignment preference).
int alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 16;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

const GemmPlan& gemm_plan(CudaState& s, const GemmKey& key, const char* op) {
  if (auto it = s.gemm_plans.find(key); it != s.gemm_plans.end()) return it->second;
  GemmPlan plan;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    DT_CUBLAS_OK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
    const cublasOperation_t ta = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    DT_CUBLAS_OK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), op);
    DT_CUBLAS_OK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), op);
    // Stored shapes: op(A) is m x k, op(B) is k x n.
    DT_CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan.a, static_cast<cudaDataType_t>(key.a_type),
                                            key.trans_a ? key.k : key.m, key.trans_a ? key.m : key.k, key.lda),
                 op);
    DT_CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan.b, static_cast<cudaDataType_t>(key.b_type),
                                            key.trans_b ? key.n : key.k, key.trans_b ? key.k : key.n, key.ldb),
                 op);
    DT_CUBLAS_OK(cublasLtMatrixLayoutCreate(&plan.c, static_cast<cudaDataType_t>(key.c_type), key.m, key.n, key.ldc),
                 op);
    DT_CUBLAS_OK(cublasLtMatmulPreferenceCreate(&pref), op);
    const uint64_t ws = kGemmWorkspaceBytes;
    DT_CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                 op);
    const uint32_t align[4] = {static_cast<uint32_t>(key.align_a), static_cast<uint32_t>(key.align_b),
                               static_cast<uint32_t>(key.align_c), static_cast<uint32_t>(key.align_c)};
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      DT_CUBLAS_OK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i])), op);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    DT_CUBLAS_OK(cublasLtMatmulAlgoGetHeuristic(s.cublaslt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1,
                                                &result, &found),
                 op);
    DT_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
             "{}: cuBLASLt has no algorithm for the GEMM m={} n={} k={} (lda {}, ldb {}, ldc {}, alignments {}/{}/{} "
             "bytes)",
             op, key.m, key.n, key.k, key.lda, key.ldb, key.ldc, key.align_a, key.align_b, key.align_c);
    plan.algo = result.algo;
    plan.workspace_bytes = result.workspaceSize;
    cublasLtMatmulPreferenceDestroy(pref);
  } catch (...) {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
    if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
    throw;
  }
  return s.gemm_plans.emplace(key, plan).first->second;
}

// D = alpha op(A) op(B) + beta D, column-major, with a cached plan.
void gemm(CudaState& s, const char* op, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const Tensor& a, int64_t lda, const Tensor& b, int64_t ldb, float beta, const Tensor& c, int64_t ldc) {
  GemmKey key;
  key.m = m, key.n = n, key.k = k, key.lda = lda, key.ldb = ldb, key.ldc = ldc;
  key.trans_a = trans_a, key.trans_b = trans_b;
  key.a_type = cuda_type(a.dtype), key.b_type = cuda_type(b.dtype), key.c_type = cuda_type(c.dtype);
  key.align_a = alignment_of(a.data), key.align_b = alignment_of(b.data), key.align_c = alignment_of(c.data);
  const GemmPlan& plan = gemm_plan(s, key, op);
  DT_CUBLAS_OK(cublasLtMatmul(s.cublaslt, plan.desc, &alpha, a.data, plan.a, b.data, plan.b, &beta, c.data, plan.c,
                              c.data, plan.c, &plan.algo, s.gemm_workspace, plan.workspace_bytes, s.stream),
               op);
}

void check_gpu_tensor(const char* op, const char* name, const Tensor& t, std::initializer_list<DType> dtypes) {
  DT_CHECK(t.device == Device::kCUDA, "{}: {} {} must be on the GPU", op, name, t.str());
  bool ok = false;
  for (DType d : dtypes) ok = ok || t.dtype == d;
  DT_CHECK(ok, "{}: {} is {}, expected {} on the GPU (kernels/ops.h: linear takes bf16 x, w, dy, dx, bf16 or "
               "fp32 y, fp32 dw)",
           op, name, t.str(), dtype_name(*dtypes.begin()));
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
}

// The sizes of y = x w^T (w [out, in], x [..., in], y [..., out]), checked; x and w bf16 on the GPU.
// y is named `y_name` (dy in the backward).
struct LinearSizes {
  int64_t out = 0, in = 0, rows = 0;
};
LinearSizes linear_sizes(const char* op, const Tensor& x, const Tensor& w, const Tensor& y, const char* y_name) {
  DT_CHECK(w.ndim() == 2, "{}: weight must be 2-D [out, in], got {}", op, w.shape.str());
  LinearSizes z{w.size(0), w.size(1), 0};
  DT_CHECK(x.ndim() >= 1 && x.size(-1) == z.in, "{}: x {} does not match weight {}", op, x.shape.str(),
           w.shape.str());
  z.rows = z.in > 0 ? x.numel() / z.in : 0;
  DT_CHECK(y.ndim() >= 1 && y.size(-1) == z.out && y.numel() == z.rows * z.out,
           "{}: {} {} does not match x {} and weight {}", op, y_name, y.shape.str(), x.shape.str(), w.shape.str());
  check_gpu_tensor(op, "x", x, {DType::kBF16});
  check_gpu_tensor(op, "w", w, {DType::kBF16});
  return z;
}

}  // namespace

void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w) {
  const char* op = "linear_forward";
  CudaState& s = cuda_state(ctx, op);
  const LinearSizes z = linear_sizes(op, x, w, y, "y");
  const int64_t out = z.out, in = z.in, rows = z.rows;
  check_gpu_tensor(op, "y", y, {DType::kBF16, DType::kF32});
  if (rows == 0 || out == 0) return;  // (rows is 0 when in is)
  gemm(s, op, true, false, out, rows, in, 1.f, w, in, x, in, 0.f, y, out);
}

void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                     const Tensor& w, double alpha, bool accumulate_dx) {
  const char* op = "linear_backward";
  CudaState& s = cuda_state(ctx, op);
  const LinearSizes z = linear_sizes(op, x, w, dy, "dy");
  const int64_t out = z.out, in = z.in, rows = z.rows;
  check_gpu_tensor(op, "dy", dy, {DType::kBF16});
  const float a = static_cast<float>(alpha);
  if (dx.defined()) {
    DT_CHECK(dx.numel() == x.numel(), "{}: dx {} vs x {}", op, dx.shape.str(), x.shape.str());
    check_gpu_tensor(op, "dx", dx, {DType::kBF16});
    if (rows > 0 && in > 0)
      gemm(s, op, false, false, in, rows, out, a, w, in, dy, out, accumulate_dx ? 1.f : 0.f, dx, in);
  }
  if (dw.defined()) {
    DT_CHECK(dw.shape == w.shape, "{}: dw {} vs w {}", op, dw.shape.str(), w.shape.str());
    check_gpu_tensor(op, "dw", dw, {DType::kF32});
    if (rows > 0 && in > 0 && out > 0) gemm(s, op, false, true, in, out, rows, a, x, in, dy, out, 1.f, dw, in);
  }
}

}  // namespace dt::cuda
