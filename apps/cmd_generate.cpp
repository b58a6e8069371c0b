// `deltatron generate --checkpoint FILE [--prompt TEXT | --prompt-file FILE | stdin] [options]`: text
// from a trained checkpoint (infer/engine.h): the prompt, GPT-2 BPE tokenised, is prefilled through
// the chunked forward, then tokens are decoded one by one and streamed to stdout (docs/inference.md).
#include <cblas.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "infer/engine.h"
#include "io/safetensors.h"
#include "layers/decode_memory.h"
#include "layers/model.h"
#include "trainer/config.h"
#include "trainer/runtime.h"
#include "trainer/train_checkpoint.h"

namespace dt {

namespace {

struct GenerateArgs {
  std::string checkpoint, prompt, prompt_file, stop;
  bool have_prompt = false;
  int max_new_tokens = 64;
  double temperature = 0;
  int top_k = 0;
  double top_p = 1;
  unsigned long long seed = 0;
  int batch = 1;
  long long max_context = 8192;
  int threads = 0;
  bool json = false;
  bool ignore_eos = false;
  std::string logits_out;
  bool no_cuda_graph = false;
  std::string mla_cache = "bf16";
  std::string device = "cpu";
  std::string tokenizer_dir = Tokenizer::default_dir();
};

std::string read_prompt(const GenerateArgs& a) {
  DT_CHECK(!(a.have_prompt && !a.prompt_file.empty()), "give the prompt once: --prompt TEXT or --prompt-file FILE, not both");
  if (a.have_prompt) return a.prompt;
  std::ostringstream ss;
  if (a.prompt_file.empty() || a.prompt_file == "-") {
    ss << std::cin.rdbuf();
    return std::move(ss).str();
  }
  std::error_code ec;
  DT_CHECK(!std::filesystem::is_directory(a.prompt_file, ec), "--prompt-file '{}' is a directory; pass a text file",
           a.prompt_file);
  std::ifstream in(a.prompt_file, std::ios::binary);
  DT_CHECK(in, "cannot open --prompt-file '{}' ({})", a.prompt_file, std::strerror(errno));
  ss << in.rdbuf();
  return std::move(ss).str();
}

// One continuation's text as it grows, cut before `stop` when that appears. With streaming, only
// the bytes that cannot be the start of the stop text are printed yet.
struct Continuation {
  std::string text;
  size_t printed = 0;
  bool stopped = false;

  // Adds a token's bytes; returns false when the stop text is now complete (text cut before it).
  bool add(std::string_view bytes, const std::string& stop) {
    const size_t before = text.size();
    text += bytes;
    if (stop.empty()) return true;
    const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
    const size_t at = text.find(stop, from);
    if (at == std::string::npos) return true;
    text.resize(at);
    stopped = true;
    return false;
  }
  // The bytes safe to print now.
  std::string_view ready(const std::string& stop) const {
    size_t end = text.size();
    if (!stopped && !stop.empty()) end = end >= stop.size() - 1 ? end - (stop.size() - 1) : 0;
    return std::string_view(text).substr(printed, end > printed ? end - printed : 0);
  }
};

// Sequence 0's logits at every position of its context, as they are computed (--logits-out).
struct LogitsRecord {
  int64_t vocab = 0;
  std::vector<int64_t> positions;
  std::vector<float> rows;  // [positions.size(), vocab]

  void add(int64_t position, std::span<const float> row) {
    positions.push_back(position);
    rows.insert(rows.end(), row.begin(), row.end());
  }
};

// --logits-out FILE: a safetensors file of input_ids I32 [1, R] (the context fed: the prompt, then the
// generated tokens fed back), logits F32 [1, R, vocab] (row i: the logits after input_ids[i]) and
// generated_ids I32 [1, G]; metadata prompt_tokens = T. Written to FILE.tmp, then renamed.
void write_logits(const std::string& path, std::span<const int32_t> prompt, const std::vector<int32_t>& generated,
                  const LogitsRecord& rec) {
  std::vector<int32_t> fed(prompt.begin(), prompt.end());
  fed.insert(fed.end(), generated.begin(), generated.end());
  const auto R = static_cast<int64_t>(rec.positions.size());
  for (int64_t i = 0; i < R; ++i)
    DT_CHECK(rec.positions[i] == i, "--logits-out: logits of position {} recorded at row {}", rec.positions[i], i);
  DT_CHECK(R <= static_cast<int64_t>(fed.size()), "--logits-out: {} rows of logits for a context of {} tokens", R,
           fed.size());
  fed.resize(static_cast<size_t>(R));
  const auto G = static_cast<int64_t>(generated.size());
  const std::string tmp = path + ".tmp";
  write_safetensors(tmp,
                    {{"input_ids", DType::kI32, {1, R}, fed.data()},
                     {"logits", DType::kF32, {1, R, rec.vocab}, rec.rows.data()},
                     {"generated_ids", DType::kI32, {1, G}, generated.data()}},
                    {{"prompt_tokens", std::to_string(prompt.size())}});
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  DT_CHECK(!ec, "--logits-out: cannot rename {} to {} ({})", tmp, path, ec.message());
}

void print_flush(std::string_view s) {
  if (s.empty()) return;
  DT_CHECK(std::fwrite(s.data(), 1, s.size(), stdout) == s.size(), "cannot write to standard output ({})",
           std::strerror(errno));
  std::fflush(stdout);
}

void run_generate(const GenerateArgs& a) {
  DT_CHECK(!a.checkpoint.empty(),
           "generate needs --checkpoint FILE, e.g. --checkpoint runs/quickstart/checkpoints/step_00000150.h5");
  DT_CHECK(a.max_new_tokens >= 1, "--max-new-tokens = {}: give a number of tokens >= 1", a.max_new_tokens);
  DT_CHECK(a.batch >= 1, "--batch = {}: give a number of continuations >= 1", a.batch);
  DT_CHECK(a.max_context >= 2, "--max-context = {}: give a number of tokens >= 2", a.max_context);
  DT_CHECK(a.logits_out.empty() || a.batch == 1, "--logits-out records one sequence; drop --batch {} or --logits-out",
           a.batch);
  DT_CHECK(a.threads >= 0, "--threads = {}: give a thread count >= 1 (0: all cores)", a.threads);
  const SamplerOptions sampling{a.temperature, a.top_k, a.top_p};
  check_sampler_options(sampling);

  const Tokenizer tok = Tokenizer::load(a.tokenizer_dir);
  const std::string prompt_text = read_prompt(a);
  const std::vector<int32_t> prompt = tok.encode(prompt_text);
  const char* source = a.have_prompt ? "--prompt" : !a.prompt_file.empty() && a.prompt_file != "-" ? "--prompt-file" : "standard input";
  DT_CHECK(!prompt.empty(), "the prompt ({}) is empty; give some text with --prompt TEXT, --prompt-file FILE or on "
           "standard input", source);
  const auto context = static_cast<long long>(prompt.size()) + a.max_new_tokens;
  DT_CHECK(context <= a.max_context,
           "the prompt ({}) is {} tokens; with --max-new-tokens {} the context would be {} tokens, over the limit of "
           "{} (--max-context, which bounds the prefill's activations and the caches); shorten the prompt, lower "
           "--max-new-tokens or raise --max-context",
           source, prompt.size(), a.max_new_tokens, context, a.max_context);

  CheckpointState state = checkpoint_read_state(a.checkpoint);  // verifies the whole file first
  const Config cfg = checkpoint_config(a.checkpoint, state);
  const MlaCache mla_cache = a.mla_cache == "fp8" ? MlaCache::kFp8 : MlaCache::kBf16;
  if (mla_cache == MlaCache::kFp8) {  // before the weights are loaded: a flag that cannot apply is an error
    DT_CHECK(std::count(cfg.model.layers.begin(), cfg.model.layers.end(), MixerKind::kMla) > 0,
             "--mla-cache fp8 applies to the latent cache of MLA layers, and this model has none (layers {}); drop "
             "--mla-cache",
             layer_pattern_to_string(cfg.model.layers));
    check_mla_fp8(cfg.model);
  }
  int threads = a.threads > 0 ? a.threads : cfg.run.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);
  Runtime runtime(resolve_device(a.device));
  Model weights(cfg.model, 1, 1, DType::kF32, runtime.device());
  load_train_checkpoint(a.checkpoint, weights.params(), nullptr);
  Engine engine(cfg.model, weights.params());

  GenerateOptions o;
  o.max_new_tokens = a.max_new_tokens;
  o.batch = a.batch;
  o.seed = a.seed;
  o.sampling = sampling;
  if (!a.ignore_eos) o.stop_tokens = {Tokenizer::kEot};
  LogitsRecord record{cfg.model.vocab_size, {}, {}};
  if (!a.logits_out.empty())
    o.on_logits = [&record](int64_t position, std::span<const float> row) { record.add(position, row); };
  o.vocab_limit = std::min(cfg.model.vocab_size, tok.vocab_size());  // ids the tokenizer can write
  o.cuda_graph = !a.no_cuda_graph;
  o.mla_cache = mla_cache;
  std::vector<Continuation> out(static_cast<size_t>(a.batch));
  const bool stream = !a.json && a.batch == 1;
  auto on_token = [&](int seq, int32_t id) {
    Continuation& c = out[static_cast<size_t>(seq)];
    const bool go_on = c.add(tok.token_bytes(id), a.stop);
    if (stream) {
      const std::string_view s = c.ready(a.stop);
      print_flush(s);
      c.printed += s.size();
    }
    return go_on;
  };
  if (!a.json) std::fprintf(stderr, "%s\n", describe_device(runtime.device(), a.device).c_str());
  const GenerateResult r = engine.generate(runtime.ctx(), prompt, o, on_token);
  if (!a.logits_out.empty()) write_logits(a.logits_out, prompt, r.tokens[0], record);
  const double tokens_per_s = r.decode_ms > 0 ? r.decode_tokens / (r.decode_ms / 1000.0) : 0.0;
  const double steady_per_s = r.steady_decode_ms > 0 ? r.steady_decode_tokens / (r.steady_decode_ms / 1000.0) : 0.0;

  if (a.json) {
    nlohmann::ordered_json conts = nlohmann::ordered_json::array();
    for (int n = 0; n < a.batch; ++n)
      conts.push_back({{"tokens", r.tokens[n]}, {"text", out[n].text}, {"stop_reason", stop_reason_name(r.stop[n])}});
    nlohmann::ordered_json j = {
        {"checkpoint", a.checkpoint},
        {"step", state.step},
        {"device", runtime.device() == Device::kCUDA ? "cuda" : "cpu"},
        {"device_name", describe_device(runtime.device(), a.device)},
        {"cuda_graph", r.graph_replays > 0},
        {"prompt", {{"text", prompt_text}, {"tokens", prompt}}},
        {"options",
         {{"max_new_tokens", a.max_new_tokens}, {"temperature", a.temperature}, {"top_k", a.top_k},
          {"top_p", a.top_p}, {"seed", a.seed}, {"batch", a.batch}, {"stop", a.stop},
          {"mla_cache", mla_cache_name(mla_cache)}}},
        {"continuations", conts},
        {"timing",
         {{"prefill_ms", r.prefill_ms}, {"decode_ms", r.decode_ms}, {"decode_steps", r.decode_steps},
          {"decode_tokens", r.decode_tokens}, {"decode_tokens_per_s", tokens_per_s},
          {"steady_decode_ms", r.steady_decode_ms}, {"steady_decode_tokens", r.steady_decode_tokens},
          {"steady_decode_tokens_per_s", steady_per_s}, {"graph_replays", r.graph_replays}}},
        {"memory",
         {{"decode_state_bytes", r.state_bytes}, {"device_used_before_bytes", r.device_used_before},
          {"device_used_after_prefill_bytes", r.device_used_after_prefill},
          {"device_used_after_decode_bytes", r.device_used_after_decode}}}};
    // Token bytes need not be valid UTF-8 (a character split across tokens): replaced, not an error.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return;
  }
  if (stream) {
    print_flush(std::string_view(out[0].text).substr(out[0].printed));  // what the stop-text check held back
    print_flush("\n");
  } else {
    for (int n = 0; n < a.batch; ++n)
      print_flush("=== continuation " + std::to_string(n + 1) + " of " + std::to_string(a.batch) + " (" +
                  stop_reason_name(r.stop[n]) + ") ===\n" + out[n].text + "\n");
  }
  std::fprintf(stderr,
               "prefill: %lld tokens in %.1f ms; decode: %lld tokens in %.1f ms (%.1f tokens/s; %.1f tokens/s after "
               "the first two steps)\n",
               static_cast<long long>(r.prompt_tokens), r.prefill_ms, static_cast<long long>(r.decode_tokens),
               r.decode_ms, tokens_per_s, steady_per_s);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a checkpoint");
  cmd->footer(
      "The prompt comes from --prompt, --prompt-file or standard input and is tokenised with GPT-2's BPE.\n"
      "Temperature 0 is greedy; a sampled run is the same for the same --seed. Generation ends at\n"
      "<|endoftext|>, at --stop TEXT, or after --max-new-tokens. docs/inference.md explains the decode state.\n"
      "--mla-cache fp8 keeps MLA layers' latent cache in fp8 e4m3 with an fp32 scale per 128 values (656 instead\n"
      "of 1152 bytes per token and layer at kv_lora_rank 512, rope dim 64); it needs kv_lora_rank a multiple of\n"
      "128, and a model without MLA layers refuses it.\n"
      "Example: deltatron generate --checkpoint runs/quickstart/checkpoints/step_00000150.h5 --prompt 'Once upon'\n");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint file (<run dir>/checkpoints/step_*.h5)");
  CLI::Option* prompt = cmd->add_option("--prompt", args->prompt, "The prompt text");
  cmd->add_option("--prompt-file", args->prompt_file, "A file holding the prompt ('-': standard input)");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "Tokens to generate at most (default 64)");
  cmd->add_option("--temperature", args->temperature, "Sampling temperature; 0 (the default): greedy");
  cmd->add_option("--top-k", args->top_k, "Sample among the k most likely tokens only (0, the default: all)");
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling: the smallest set of probability >= p, in (0, 1] (default 1)");
  cmd->add_option("--seed", args->seed, "Seed of the sampling (default 0)");
  cmd->add_option("--batch", args->batch, "Continuations of the prompt, sampled together (default 1)");
  cmd->add_option("--stop", args->stop, "Stop a continuation when it produces this text (not printed)");
  cmd->add_option("--max-context", args->max_context, "Limit on prompt + new tokens (default 8192)");
  cmd->add_option("--threads", args->threads, "OpenBLAS threads (default: the config's run.threads; 0: all cores)");
  cmd->add_option("--device", args->device, "cpu (the default, fp32) or cuda (bf16 with fp32 sums, a CUDA graph per step)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--mla-cache", args->mla_cache,
                  "MLA latent cache: bf16 (the default; fp32 on the CPU) or fp8 (e4m3, an fp32 scale per 128 values)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  cmd->add_flag("--no-cuda-graph", args->no_cuda_graph,
                "GPU: run each decode step op by op instead of replaying a CUDA graph (for debugging)");
  cmd->add_option("--tokenizer", args->tokenizer_dir, "Directory of encoder.json and vocab.bpe (default: assets/gpt2)");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Go on after <|endoftext|> (benchmarks, comparisons)");
  cmd->add_option("--logits-out", args->logits_out,
                  "Write the prompt's and each step's logits to this safetensors file (scripts/hf_check.py reads it)");
  cmd->add_flag("--json", args->json, "Print one JSON object (tokens, text, timing) instead of streaming text");
  cmd->callback([args, prompt] {
    args->have_prompt = prompt->count() > 0;
    run_generate(*args);
  });
}

}  // namespace dt
