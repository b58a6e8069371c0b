// ParamStore: every parameter of the model in one arena, its gradient in a twin
// arena, and a named table of what each parameter is (docs/architecture.md, "Conventions").
//
// Mixed precision on the GPU (docs/architecture.md, "Precision"): the parameters and gradients are fp32 (the
// master weights); every matrix (2-D parameter: the linear weights and the embedding) also has
// a bf16 copy in a third arena, which the matmuls read. param() returns what the ops take (the
// bf16 copy for matrices on the GPU, else the master), master() the fp32 master. After writing
// masters (init, checkpoint load) call sync_compute(); the fused AdamW rewrites the copies.
// Activations are act_dtype() (bf16 on the GPU), statistics (norms' rstd, softmax lse, losses,
// GDN gates) stat_dtype() (fp32 on the GPU); on the CPU both are the parameters' dtype.
//
//   ParamStore ps(DType::kF32, Device::kCPU);
//   int w = ps.declare({"model.layers.0.mlp.up_proj.weight", {F, C}, Init::kNormal, 0.02,
//                       TpSplit::kColumn, /*decay=*/true});
//   ps.allocate(); ps.init(seed);
//   Tensor W = ps.param(w), dW = ps.grad(w);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/arena.h"

namespace dt {

enum class Init : uint8_t {
  kNormal,  // N(0, std^2)
  kZeros,
  kOnes,
  kALog,    // GDN A_log = log(U(1, 16))
  kDtBias,  // GDN dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.1]
};

// How tensor parallelism splits a parameter (docs/parallel.md, "Tensor parallelism in the layers").
enum class TpSplit : uint8_t {
  kReplicated,
  kColumn,  // split along dim 0 (output features / heads)
  kRow,     // split along dim 1 (input features)
};

// This rank's place in its tensor-parallel group. Layers take it at construction (their local
// shapes size the buffers they declare); the collectives go through Context::tp.
struct TpLayout {
  int rank = 0;
  int size = 1;
};

struct ParamInfo {
  std::string name;  // Hugging Face name, e.g. "model.layers.3.linear_attn.A_log"
  // Declared full (unsharded); ParamStore::declare keeps the full shape in full_shape and turns
  // shape into this rank's part, which is what is allocated.
  Shape shape;
  Init init = Init::kNormal;
  double std = 0.02;
  TpSplit split = TpSplit::kReplicated;
  bool decay = true;  // AdamW weight decay applies
  // kColumn / kRow: the full sizes of the blocks along the split dimension, each cut in TP equal
  // parts, rank r taking part r of every block (GDN in_proj_qkv and conv1d: [q | k | v] split by
  // head). Empty: one block (a contiguous cut).
  std::vector<int64_t> tp_blocks = {};
  // A replicated parameter whose gradient on each TP rank covers only that rank's heads (GDN
  // norm.weight, GQA q_norm / k_norm): the gradient is summed over TP before the update.
  bool tp_partial_grad = false;
  Shape full_shape = {};  // set by declare: the whole tensor
};

// Copies between a whole tensor `full` (p.full_shape) and the part of it that rank tp.rank holds
// (p.shape at that rank), elements of `elem_bytes` bytes, host memory. to_part: full -> part.
// Checkpoints gather and scatter through it.
void tp_copy_part(const ParamInfo& p, const TpLayout& tp, void* full, void* part, size_t elem_bytes, bool to_part);

class ParamStore {
 public:
  // tp: this rank's tensor-parallel place; split parameters are stored as this rank's part.
  ParamStore(DType dtype, Device device, TpLayout tp = {});

  int declare(ParamInfo info);  // before allocate(); returns the slot
  void allocate();
  // Fill every parameter from Philox: the value of element i of tensor `name`
  // depends only on (seed, name, i).
  void init(uint64_t seed);
  void zero_grads();

  Tensor param(int slot) const { return compute_slot_[slot] >= 0 ? compute_.get(compute_slot_[slot]) : params_.get(slot); }
  Tensor master(int slot) const { return params_.get(slot); }
  Tensor grad(int slot) const { return grads_.get(slot); }
  Tensor param(std::string_view name) const { return param(params_.slot(name)); }
  Tensor master(std::string_view name) const { return params_.get(name); }
  Tensor grad(std::string_view name) const { return grads_.get(name); }
  // The bf16 copy of slot's parameter, undefined when the ops read the master directly.
  Tensor compute_copy(int slot) const { return compute_slot_[slot] >= 0 ? compute_.get(compute_slot_[slot]) : Tensor(); }
  // Rewrites every bf16 copy from its master (after init or a checkpoint load). Synchronous.
  void sync_compute();
  int slot(std::string_view name) const { return params_.slot(name); }
  bool contains(std::string_view name) const { return params_.contains(name); }

  const std::vector<ParamInfo>& infos() const { return infos_; }
  int size() const { return static_cast<int>(infos_.size()); }
  int64_t numel() const;  // this rank's parameters
  DType dtype() const { return dtype_; }
  DType act_dtype() const { return device_ == Device::kCUDA ? DType::kBF16 : dtype_; }
  DType stat_dtype() const { return device_ == Device::kCUDA ? DType::kF32 : dtype_; }
  Device device() const { return device_; }
  const TpLayout& tp() const { return tp_; }
  Arena& params_arena() { return params_; }
  Arena& grads_arena() { return grads_; }

 private:
  DType dtype_;
  Device device_;
  TpLayout tp_;
  std::vector<ParamInfo> infos_;
  Arena params_;
  Arena grads_;
  Arena compute_;                  // bf16 copies of the matrices (GPU only)
  std::vector<int> compute_slot_;  // per parameter: its slot in compute_, or -1
};

}  // namespace dt
