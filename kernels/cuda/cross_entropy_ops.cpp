// The Tensor-level cross-entropy ops of kernels/cuda_ops.h: check devices, dtypes and shapes, launch the
// kernels of kernels/cuda/cross_entropy.cu on the context's stream, then check the targets.
//
// Target ids outside [0, vocab) are checked on the device, in the same kernel: each call clears a flag,
// the kernel lowers it to the first bad row, and the call reads it back (a 4-byte copy and a stream
// synchronisation, a few microseconds once per call: the LM head runs once per micro-batch) and throws
// naming the position and the id, as the CPU reference does. The synchronisation makes these calls
// unsuitable for CUDA-graph capture.

#include "kernels/cuda/dense_mm_launch.h"
#include "kernels/cuda/dense_mm_state.h"
#include "kernels/cuda_ops.h"
#include "kernels/op_checks.h"

namespace dt::cuda {

namespace {

void check_tensor(const char* op, const char* name, const Tensor& t, DType dtype) {
  DT_CHECK(t.defined(), "{}: {} is missing", op, name);
  DT_CHECK(t.device == Device::kCUDA, "{}: {} {} must be on the GPU", op, name, t.str());
  DT_CHECK(t.dtype == dtype,
           "{}: {} is {}, expected {} on the GPU (logits and dlogits bf16, targets int32, losses and lse fp32)", op,
           name, t.str(), dtype_name(dtype));
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
}

CrossEntropyParams make_params(const char* op, CudaState& s, const Tensor& logits, const Tensor& lse,
                               const Tensor& targets) {
  check_tensor(op, "logits", logits, DType::kBF16);
  check_tensor(op, "lse", lse, DType::kF32);
  check_tensor(op, "targets", targets, DType::kI32);
  const auto [n, vocab] = op_checks::cross_entropy(op, logits, lse, targets);
  DT_CHECK(n < kNoBadRow, "{}: {} rows is more than one call takes; split the batch", op, n);
  CrossEntropyParams p;
  p.n = n, p.vocab = vocab;
  p.logits = static_cast<const uint16_t*>(logits.data);
  p.targets = targets.ptr<int32_t>();
  p.lse = lse.ptr<float>();
  p.bad_row = s.ce_bad_row;
  DT_CUDA_OK(cudaMemsetAsync(s.ce_bad_row, 0x7f, sizeof(int), s.stream), op);  // = kNoBadRow
  return p;
}

// Reads the flag back; throws for the first row whose target is outside the vocabulary.
void check_targets(const char* op, CudaState& s, const CrossEntropyParams& p) {
  if (p.n == 0) return;
  DT_CUDA_OK(cudaMemcpyAsync(s.ce_bad_row_host, s.ce_bad_row, sizeof(int), cudaMemcpyDeviceToHost, s.stream), op);
  DT_CUDA_OK(cudaStreamSynchronize(s.stream), op);
  const int row = *s.ce_bad_row_host;
  if (row == kNoBadRow) return;
  int32_t id = 0;
  DT_CUDA_OK(cudaMemcpy(&id, p.targets + row, sizeof(id), cudaMemcpyDeviceToHost), op);
  DT_FAIL("{}: target id {} at position {} is outside the vocabulary [0, {}); check the data shards and "
          "model.vocab_size",
          op, id, row, p.vocab);
}

// The per-row losses, checked against the targets.
float* losses_of(const char* op, const Tensor& losses, const Tensor& targets) {
  check_tensor(op, "losses", losses, DType::kF32);
  DT_CHECK(losses.numel() == targets.numel(), "{}: losses {} must hold one value per target {}", op,
           losses.shape.str(), targets.shape.str());
  return losses.ptr<float>();
}

CrossEntropyVariant preferred_variant(const CudaState& s) {
  return s.ce_variant_for_testing.value_or(kCrossEntropyDefaultVariant);
}

}  // namespace

void set_cross_entropy_variant_for_testing(Context& ctx, std::optional<CrossEntropyVariant> variant) {
  cuda_state(ctx, "set_cross_entropy_variant_for_testing").ce_variant_for_testing = variant;
}

void cross_entropy_forward(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets) {
  const char* op = "cross_entropy_forward";
  CudaState& s = cuda_state(ctx, op);
  CrossEntropyParams p = make_params(op, s, logits, lse, targets);
  p.losses = losses_of(op, losses, targets);
  cross_entropy_forward_launch(p, preferred_variant(s), s.stream);
  check_targets(op, s, p);
}

void cross_entropy_backward(Context& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, double grad_scale) {
  const char* op = "cross_entropy_backward";
  CudaState& s = cuda_state(ctx, op);
  check_tensor(op, "dlogits", dlogits, DType::kBF16);
  DT_CHECK(dlogits.numel() == logits.numel(), "{}: dlogits {} vs logits {}", op, dlogits.shape.str(),
           logits.shape.str());
  CrossEntropyParams p = make_params(op, s, logits, lse, targets);
  p.dlogits = static_cast<uint16_t*>(dlogits.data);
  p.grad_scale = static_cast<float>(grad_scale);
  cross_entropy_backward_launch(p, s.stream);
  check_targets(op, s, p);
}

void cross_entropy_fused(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                         const Tensor& targets, double grad_scale) {
  const char* op = "cross_entropy_fused";
  CudaState& s = cuda_state(ctx, op);
  CrossEntropyParams p = make_params(op, s, logits, lse, targets);
  p.losses = losses_of(op, losses, targets);
  p.dlogits = static_cast<uint16_t*>(logits.data);  // in place
  p.grad_scale = static_cast<float>(grad_scale);
  cross_entropy_fused_launch(p, preferred_variant(s), s.stream);
  check_targets(op, s, p);
}

}  // namespace dt::cuda
