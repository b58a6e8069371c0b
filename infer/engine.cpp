#include "infer/engine.h"

#include <chrono>

#include "core/device.h"
#include "core/error.h"
#include "layers/model.h"

namespace dt {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> to_host_f32(const Tensor& t) {
  DT_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kF64, "decode: logits of dtype {} cannot be sampled",
           dtype_name(t.dtype));
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    device_copy(out.data(), Device::kCPU, t.data, t.device, t.bytes());
  } else {
    std::vector<double> d(out.size());
    device_copy(d.data(), Device::kCPU, t.data, t.device, t.bytes());
    for (size_t i = 0; i < d.size(); ++i) out[i] = static_cast<float>(d[i]);
  }
  return out;
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kLength: return "length";
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kCaller: return "stop_text";
  }
  return "?";
}

Engine::Engine(const ModelConfig& cfg, ParamStore& weights) : cfg_(cfg), weights_(weights) {
  DT_CHECK(weights.tp().size == 1, "generate: the weights must be whole (tensor-parallel size 1), got tp = {}",
           weights.tp().size);
}

std::unique_ptr<DecodeState> Engine::new_state(int n_seqs, int64_t capacity, MlaCache mla_cache) const {
  return std::make_unique<DecodeState>(cfg_, n_seqs, capacity, weights_.act_dtype(), weights_.stat_dtype(),
                                       weights_.device(), mla_cache);
}

Decoder& Engine::decoder(int n_seqs) {
  if (!decoder_ || decoder_->n_seqs() != n_seqs) {
    decoder_.reset();
    decoder_ = std::make_unique<Decoder>(cfg_, weights_, n_seqs);
  }
  decoder_->set_graph(cuda_graph_);
  return *decoder_;
}

void Engine::check_prompt(std::span<const int32_t> prompt) const {
  DT_CHECK(!prompt.empty(), "generate: the prompt is empty; give at least one token of text");
  for (size_t i = 0; i < prompt.size(); ++i)
    DT_CHECK(prompt[i] >= 0 && prompt[i] < cfg_.vocab_size,
             "generate: prompt token {} (at position {}) is outside the model's vocabulary [0, {})", prompt[i], i,
             cfg_.vocab_size);
}

std::vector<float> Engine::prefill(Context& ctx, std::span<const int32_t> prompt, DecodeState& state,
                                   std::vector<float>* all_logits) {
  check_prompt(prompt);
  DT_CHECK(ctx.device == weights_.device() && state.device() == weights_.device(),
           "prefill: the context, the state and the weights must be on one device");
  const auto T = static_cast<int64_t>(prompt.size());
  DT_CHECK(state.length() == 0, "prefill: the state already holds {} tokens; give a new state", state.length());
  DT_CHECK(T <= state.capacity(), "prefill: the prompt's {} tokens exceed the state's capacity {}", T,
           state.capacity());
  // A model of this prompt's shape with the engine's weights (the same declarations, so the same
  // arena layout: one copy).
  Model model(cfg_, 1, static_cast<int>(T), weights_.dtype(), weights_.device());
  Arena& dst = model.params().params_arena();
  Arena& src = weights_.params_arena();
  DT_CHECK(dst.bytes() == src.bytes(), "prefill: the weights ({} bytes) do not match the model's layout ({} bytes)",
           src.bytes(), dst.bytes());
  device_copy(dst.base(), dst.device(), src.base(), src.device(), src.bytes());
  model.params().sync_compute();
  Decoder& dec = decoder(state.n_seqs());
  for (int i = 0; i < cfg_.n_layers(); ++i) dec.mixer(i).before_prefill(model.block(i).mixer(), state.layer(i));
  const Tensor hn = model.forward_hidden(ctx, prompt.data());  // [1, T, C], final-normed
  for (int i = 0; i < cfg_.n_layers(); ++i) dec.mixer(i).capture(model.block(i).mixer(), state.layer(i), T);
  state.set_length(T);
  state.broadcast_first();
  // The logits through the decoder's LM head: the dtype and arithmetic of a step's. all_logits: every
  // prompt position's, a row at a time (the head's scratch holds n_seqs rows).
  const Tensor rows = hn.view({T, cfg_.d_model});
  if (all_logits) {
    all_logits->clear();
    for (int64_t p = 0; p < T; ++p) {
      const std::vector<float> row = to_host_f32(dec.head(ctx, rows.narrow0(p, 1)));
      all_logits->insert(all_logits->end(), row.begin(), row.end());
    }
  }
  return to_host_f32(dec.head(ctx, rows.narrow0(T - 1, 1)));
}

std::vector<float> Engine::step(Context& ctx, std::span<const int32_t> ids, DecodeState& state) {
  DT_CHECK(static_cast<int64_t>(ids.size()) == state.n_seqs(), "decode: {} ids for {} sequences", ids.size(),
           state.n_seqs());
  for (int32_t id : ids)
    DT_CHECK(id >= 0 && id < cfg_.vocab_size, "decode: token {} is outside the model's vocabulary [0, {})", id,
             cfg_.vocab_size);
  return to_host_f32(decoder(state.n_seqs()).step(ctx, ids.data(), state));
}

GenerateResult Engine::generate(Context& ctx, std::span<const int32_t> prompt, const GenerateOptions& o,
                                const TokenCallback& on_token) {
  check_sampler_options(o.sampling);
  DT_CHECK(o.batch >= 1, "--batch = {}: give a number of sequences >= 1", o.batch);
  DT_CHECK(o.max_new_tokens >= 0, "--max-new-tokens = {}: give a number of tokens >= 0", o.max_new_tokens);
  DT_CHECK(ctx.device == weights_.device(), "generate: the context's device differs from the weights'");
  check_prompt(prompt);
  set_cuda_graph(o.cuda_graph);
  const int N = o.batch;
  const int64_t V = cfg_.vocab_size;
  const int64_t vocab = o.vocab_limit > 0 ? std::min<int64_t>(o.vocab_limit, V) : V;
  GenerateResult r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.tokens.assign(static_cast<size_t>(N), {});
  r.stop.assign(static_cast<size_t>(N), StopReason::kLength);
  // The last generated token is never fed back, so the context holds at most prompt + max_new - 1.
  const int64_t capacity = r.prompt_tokens + std::max(o.max_new_tokens - 1, 0);
  const bool gpu = weights_.device() == Device::kCUDA;
  if (gpu) r.device_used_before = device_memory_used();
  // The prompt goes into a state of one sequence, which is then copied into the N sequences' state:
  // the prefill's prompt-length model and the N sequences' caches are never held at once.
  std::unique_ptr<DecodeState> state = new_state(1, std::max<int64_t>(capacity, 1), o.mla_cache);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> prompt_logits;
  std::vector<float> first = prefill(ctx, prompt, *state, o.on_logits ? &prompt_logits : nullptr);
  if (N > 1) {
    std::unique_ptr<DecodeState> wide = new_state(N, state->capacity(), o.mla_cache);
    wide->fill_from_first(*state);
    state = std::move(wide);
  }
  r.state_bytes = state->bytes();
  r.prefill_ms = ms_since(t0);
  if (gpu) r.device_used_after_prefill = device_memory_used();
  if (o.on_logits)
    for (int64_t p = 0; p < r.prompt_tokens; ++p)
      o.on_logits(p, {prompt_logits.data() + p * V, static_cast<size_t>(V)});
  if (o.max_new_tokens == 0) return r;

  t0 = std::chrono::steady_clock::now();
  auto steady0 = t0;
  Decoder& dec = decoder(N);  // the prefill's for one sequence, else a new one
  const int64_t replays0 = graph_replays();
  // Greedy without a logits callback: the choice is made where the logits are (f32 there) and
  // written where the next step reads its ids. After the first, the steps go kChunk at a time into
  // one CUDA graph (Decoder::step_chained with steps), whose ids come back in one copy, and the
  // host queues the next chunk before it waits for the current one's ids (two page-locked slots,
  // one event each), so the device never waits on the host.
  const bool greedy_here = o.sampling.temperature == 0 && !o.on_logits && weights_.stat_dtype() == DType::kF32;
  const Device dev = weights_.device();
  constexpr int kChunk = 8;
  static_assert(kChunk <= Decoder::kMaxChainedSteps);
  struct Chunk {
    int64_t first = 0;  // its first step
    int steps = 0;
    int64_t replays_before = 0;  // graph_replays() before it was queued
    bool replayed = false;       // whether it ran as a graph replay
  };
  std::vector<Chunk> chunks;  // queued, in order; chunk c's ids go to slot c % 2
  std::vector<std::unique_ptr<PinnedBuffer>> slot;
  std::vector<std::unique_ptr<StreamEvent>> ready;
  if (greedy_here)
    for (int k = 0; k < 2; ++k) {
      slot.push_back(std::make_unique<PinnedBuffer>(static_cast<size_t>(kChunk * N) * sizeof(int32_t), dev));
      ready.push_back(std::make_unique<StreamEvent>(dev));
    }
  std::vector<bool> done(static_cast<size_t>(N), false);
  std::vector<int32_t> next(static_cast<size_t>(N), 0);
  int64_t next_step = 1;  // greedy_here: the first step not queued yet
  auto queue_chunk = [&] {  // the steps from next_step: the first alone (host ids), then kChunk at a time
    const int64_t a = next_step, before = graph_replays();
    const int steps = a == 1 ? 1 : static_cast<int>(std::min<int64_t>(kChunk, o.max_new_tokens - a));
    if (a == 1)
      dec.step(ctx, next.data(), *state, vocab);
    else
      dec.step_chained(ctx, *state, vocab, steps);
    const size_t c = chunks.size();
    const Tensor ids = dec.chained_ids().narrow0(0, steps);
    device_copy_async(slot[c % 2]->data(), Device::kCPU, ids.data, ids.device, ids.bytes(), ctx.stream);
    ready[c % 2]->record(ctx.stream);
    chunks.push_back({a, steps, before, graph_replays() > before});
    next_step = a + steps;
  };
  size_t cur = 0;          // greedy_here: the chunk holding step s
  bool cur_ready = false;  // whether the host has waited for its ids
  // The steady rate's window opens when the host has step 2's ids; the steps done by then (with
  // chunks, the rest of step 2's chunk too) are not counted in it.
  int64_t steady_after = 2;
  std::vector<float> logits;  // [N, V]
  const int32_t* chosen = nullptr;  // [N], greedy_here
  for (int64_t s = 0; s < o.max_new_tokens; ++s) {
    if (s > 0) {
      if (greedy_here) {
        if (chunks.empty()) queue_chunk();  // step 1, from the host's ids
        if (s == chunks[cur].first + chunks[cur].steps) ++cur, cur_ready = false;
        if (cur + 1 == chunks.size() && next_step < o.max_new_tokens) queue_chunk();  // the next, before the wait
        const Chunk& ch = chunks[cur];
        if (!cur_ready) ready[cur % 2]->synchronize(), cur_ready = true;
        // Step k of a chunk leaves its ids in row (k + 1) % steps (Decoder::step_chained).
        const int64_t row = (s - ch.first + 1) % ch.steps;
        chosen = static_cast<const int32_t*>(slot[cur % 2]->data()) + row * N;
        r.graph_replays = ch.replays_before - replays0 + (ch.replayed ? s - ch.first + 1 : 0);
        if (s == 2) steady_after = ch.first + ch.steps - 1;
      } else {
        logits = step(ctx, next, *state);
        if (o.on_logits && !done[0]) o.on_logits(r.prompt_tokens + s - 1, {logits.data(), static_cast<size_t>(V)});
        r.graph_replays = graph_replays() - replays0;
      }
      ++r.decode_steps;
      if (r.decode_steps == 2) steady0 = std::chrono::steady_clock::now();
    }
    bool any = false;
    for (int n = 0; n < N; ++n) {
      if (done[n]) continue;
      const int32_t tok =
          s > 0 && greedy_here
              ? chosen[n]
              : sample_token({s == 0 ? first.data() : logits.data() + n * V, static_cast<size_t>(vocab)}, o.sampling,
                             sampler_uniform(o.seed, n, s));
      next[n] = tok;
      if (s > 0) ++r.decode_tokens;
      if (s > steady_after) ++r.steady_decode_tokens;
      if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), tok) != o.stop_tokens.end()) {
        done[n] = true;
        r.stop[n] = StopReason::kStopToken;
        continue;
      }
      r.tokens[n].push_back(tok);
      if (on_token && !on_token(n, tok)) {
        done[n] = true;
        r.stop[n] = StopReason::kCaller;
      }
      any = any || !done[n];
    }
    if (!any) break;
  }
  // A step queued ahead of an ending still runs: wait for it before the state goes.
  for (auto& e : ready) e->synchronize();
  r.decode_ms = ms_since(t0);
  if (gpu) r.device_used_after_decode = device_memory_used();  // with the recorded step graph
  if (r.decode_steps > 2) r.steady_decode_ms = ms_since(steady0);
  return r;
}

}  // namespace dt
