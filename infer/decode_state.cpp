#include "infer/decode_state.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/device.h"
#include "core/error.h"
#include "core/fp8.h"
#include "infer/decode_ops.h"

namespace dt {

DecodeState::DecodeState(const ModelConfig& cfg, int n_seqs, int64_t capacity, DType cache_dtype, DType state_dtype,
                         Device device, MlaCache mla_cache)
    : n_seqs_(n_seqs), capacity_(capacity), mla_cache_(mla_cache), arena_("decode state", device) {
  DT_CHECK(n_seqs >= 1, "decode state: the number of sequences must be >= 1, got {}", n_seqs);
  DT_CHECK(capacity >= 1, "decode state: the capacity must be >= 1 token, got {}", capacity);
  const bool fp8 = mla_cache == MlaCache::kFp8;
  if (fp8 && std::count(cfg.layers.begin(), cfg.layers.end(), MixerKind::kMla) > 0) check_mla_fp8(cfg);
  const int64_t N = n_seqs, cap = capacity;
  struct Slots {
    int a = -1, b = -1, c = -1;
  };
  std::vector<Slots> slots;
  for (int i = 0; i < cfg.n_layers(); ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    Slots s;
    switch (cfg.layers[i]) {
      case MixerKind::kGdn: {
        const GdnConfig& g = cfg.gdn;
        const int64_t C = 2 * int64_t{g.n_k_heads} * g.head_k_dim + int64_t{g.n_v_heads} * g.head_v_dim;
        s.a = arena_.declare(p + "recurrent", state_dtype, {N, g.n_v_heads, g.head_k_dim, g.head_v_dim});
        if (g.conv_kernel > 1) s.b = arena_.declare(p + "conv_tail", cache_dtype, {N, g.conv_kernel - 1, C});
        break;
      }
      case MixerKind::kAttn: {
        const AttnConfig& a = cfg.attn;
        s.a = arena_.declare(p + "keys", cache_dtype, {N, cap, a.n_kv_heads, a.head_dim});
        s.b = arena_.declare(p + "values", cache_dtype, {N, cap, a.n_kv_heads, a.head_dim});
        break;
      }
      case MixerKind::kMla: {
        const MlaConfig& m = cfg.mla;
        s.a = arena_.declare(p + "latent", fp8 ? DType::kF8E4M3 : cache_dtype, {N, cap, m.kv_lora_rank});
        s.b = arena_.declare(p + "rope_key", cache_dtype, {N, cap, m.qk_rope_head_dim});
        if (fp8) s.c = arena_.declare(p + "latent_scale", DType::kF32, {N, cap, m.kv_lora_rank / kFp8Block});
        break;
      }
    }
    slots.push_back(s);
  }
  if (device == Device::kCUDA) {
    int64_t ws = 1;
    for (MixerKind k : cfg.layers) {
      if (k == MixerKind::kAttn)
        ws = std::max(ws, decode_attention_workspace(device, N, cfg.attn.n_heads, cap, cfg.attn.head_dim));
      if (k == MixerKind::kMla)
        ws = std::max(ws, mla_decode_workspace(device, N, cfg.mla.n_heads, cap, cfg.mla.kv_lora_rank));
    }
    counter_ = arena_.declare("position", DType::kI32, {1});
    workspace_ = arena_.declare("attention.workspace", DType::kF32, {ws});
  }
  arena_.allocate();  // zeroed: the empty context
  for (int i = 0; i < cfg.n_layers(); ++i) {
    LayerDecodeState l;
    l.kind = cfg.layers[i];
    const Slots& s = slots[i];
    auto get = [&](int slot) { return slot >= 0 ? arena_.get(slot) : Tensor{}; };
    switch (l.kind) {
      case MixerKind::kGdn: l.recurrent = get(s.a), l.conv_tail = get(s.b); break;
      case MixerKind::kAttn: l.keys = get(s.a), l.values = get(s.b); break;
      case MixerKind::kMla: l.latent = get(s.a), l.rope_key = get(s.b), l.latent_scale = get(s.c); break;
    }
    if (l.kind != MixerKind::kGdn) l.workspace = get(workspace_);
    layers_.push_back(l);
  }
}

void DecodeState::set_length(int64_t n) {
  DT_CHECK(n >= 0 && n <= capacity_, "decode state: length {} outside [0, {}] (the capacity)", n, capacity_);
  length_ = n;
  if (counter_ >= 0) {
    const auto v = static_cast<int32_t>(n);
    const Tensor c = arena_.get(counter_);
    device_copy(c.data, c.device, &v, Device::kCPU, sizeof v);
  }
}

void DecodeState::advanced() {
  DT_CHECK(length_ < capacity_, "decode state: a step past the capacity {}", capacity_);
  ++length_;
}

void DecodeState::broadcast_first() { copy_first(*this); }

void DecodeState::fill_from_first(const DecodeState& src) {
  DT_CHECK(&src != this && src.capacity_ == capacity_ && src.layers_.size() == layers_.size() &&
               src.device() == device() && src.mla_cache_ == mla_cache_,
           "decode state: filling from a state of another model, capacity ({} vs {}), device or cache format",
           src.capacity_, capacity_);
  set_length(src.length_);
  copy_first(src);
}

// Sequence 0 of src, its state and its first length() cache positions, into every sequence here
// (src itself: the others).
void DecodeState::copy_first(const DecodeState& src) {
  auto spread = [&](const Tensor& from, const Tensor& to, bool cache) {
    if (!to.defined()) return;
    const size_t seq_bytes = to.bytes() / static_cast<size_t>(n_seqs_);
    DT_CHECK(from.defined() && from.bytes() / static_cast<size_t>(src.n_seqs_) == seq_bytes,
             "decode state: the source's sequences differ in size");
    const size_t bytes = cache ? seq_bytes / static_cast<size_t>(capacity_) * static_cast<size_t>(length_) : seq_bytes;
    auto* base = static_cast<char*>(to.data);
    for (int n = &src == this ? 1 : 0; n < n_seqs_; ++n)
      device_copy(base + n * seq_bytes, to.device, from.data, from.device, bytes);
  };
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerDecodeState &f = src.layers_[i], &t = layers_[i];
    spread(f.recurrent, t.recurrent, false);
    spread(f.conv_tail, t.conv_tail, false);
    spread(f.keys, t.keys, true);
    spread(f.values, t.values, true);
    spread(f.latent, t.latent, true);
    spread(f.rope_key, t.rope_key, true);
    spread(f.latent_scale, t.latent_scale, true);
  }
}

int64_t DecodeState::recurrent_elements() const {
  int64_t n = 0;
  for (const LayerDecodeState& l : layers_)
    if (l.recurrent.defined()) n += l.recurrent.numel() / n_seqs_;
  return n;
}

int64_t DecodeState::conv_tail_elements() const {
  int64_t n = 0;
  for (const LayerDecodeState& l : layers_)
    if (l.conv_tail.defined()) n += l.conv_tail.numel() / n_seqs_;
  return n;
}

int64_t DecodeState::cache_elements_per_token() const {
  int64_t n = 0;
  for (const LayerDecodeState& l : layers_)
    for (const Tensor* c : {&l.keys, &l.values, &l.latent, &l.rope_key, &l.latent_scale})
      if (c->defined()) n += c->numel() / (n_seqs_ * capacity_);
  return n;
}

int64_t DecodeState::cache_bytes_per_token() const {
  int64_t n = 0;
  for (const LayerDecodeState& l : layers_)
    for (const Tensor* c : {&l.keys, &l.values, &l.latent, &l.rope_key, &l.latent_scale})
      if (c->defined()) n += static_cast<int64_t>(c->bytes()) / (n_seqs_ * capacity_);
  return n;
}

}  // namespace dt
