// `deltatron info FILE`: what a file is, and whether it is valid. Dispatches on the file's first
// bytes (and, for YAML training configs, its extension), so that new kinds (checkpoints, exports)
// slot in as one more case of FileKind.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/info_shard_set.h"
#include "core/error.h"
#include "core/fp8.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "layers/decode_memory.h"
#include "layers/param_count.h"
#include "trainer/checkpoint_check.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"

namespace dt {

namespace {

enum class FileKind { kShard, kCheckpoint, kHdf5, kConfig, kShardDir, kUnknown };

constexpr char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
// A Deltatron checkpoint starts with its 512-byte header (trainer/checkpoint_format.cpp); HDF5 follows it.
constexpr char kCheckpointMagic[] = "DELTATRON-CHECKPOINT";

struct InfoArgs {
  std::string path;
  int vocab_size = Tokenizer::kEot + 1;
  int show = 24;  // tokens shown (and decoded) from the start of a shard
  std::string tokenizer_dir = Tokenizer::default_dir();
  std::vector<std::string> sets;  // --set overrides of a config
  bool json = false;              // a config's summary as one JSON object
  bool tensors = false;           // a checkpoint's tensors: names, shapes, dtypes
};

// The contexts at which a config's decode memory is shown, in tokens.
constexpr int64_t kDecodeContexts[] = {1024, 8192, 32768, 131072};

// Reads the first bytes of `path` and says what kind of file it is; a file that cannot be read is an error.
FileKind sniff_file_kind(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  DT_CHECK(std::filesystem::exists(st), "{}: no such file", path);
  if (std::filesystem::is_directory(st)) return FileKind::kShardDir;
  std::ifstream f(path, std::ios::binary);
  DT_CHECK(f.good(), "{}: cannot open: {}", path, std::strerror(errno));
  char head[sizeof(kCheckpointMagic) - 1] = {};
  f.read(head, sizeof(head));
  const std::streamsize got = f.gcount();
  int32_t magic = 0;
  if (got >= 4) std::memcpy(&magic, head, 4);
  if (got >= 4 && magic == kShardMagic) return FileKind::kShard;
  if (got >= 8 && std::memcmp(head, kHdf5Signature, 8) == 0) return FileKind::kHdf5;
  if (got == sizeof(head) && std::memcmp(head, kCheckpointMagic, sizeof(head)) == 0) return FileKind::kCheckpoint;
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".yaml" || ext == ".yml") return FileKind::kConfig;
  return FileKind::kUnknown;
}

// Printable text, with control characters escaped, cut to `max_chars`.
std::string escaped(const std::string& s, size_t max_chars) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  return out;
}

void info_shard(const InfoArgs& a) {
  const std::vector<uint16_t> tokens = load_shard(a.path, a.vocab_size);  // throws with the problem
  const ShardStats s = shard_stats(tokens);
  std::printf("file:       %s\n", a.path.c_str());
  std::printf("kind:       token shard (llm.c format), version %d, uint16 ids, %s split by its name\n", kShardVersion,
              a.path.find("_val_") != std::string::npos     ? "validation"
              : a.path.find("_train_") != std::string::npos ? "train"
                                                            : "no");
  std::printf("size:       %llu bytes\n", static_cast<unsigned long long>(kShardHeaderBytes + 2 * tokens.size()));
  std::printf("tokens:     %lld\n", static_cast<long long>(s.n_tokens));
  std::printf("documents:  %lld (<|endoftext|> tokens)\n", static_cast<long long>(s.n_documents));
  std::printf("ids:        min %d, max %d (all < vocab_size %d)\n", s.min_id, s.max_id, a.vocab_size);
  if (!s.starts_with_eot) {
    std::printf("note:       the shard does not start with <|endoftext|>: it continues a document from the shard "
                "before it, or was not made by `deltatron prepare`\n");
  }
  const size_t n_show = std::min(tokens.size(), static_cast<size_t>(std::max(a.show, 0)));
  if (n_show > 0) {
    std::vector<int32_t> head(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n_show));
    std::string ids;
    for (int32_t id : head) ids += fmt::format("{}{}", ids.empty() ? "" : " ", id);
    std::printf("first %zu:   %s\n", n_show, ids.c_str());
    try {
      const Tokenizer tok = Tokenizer::load(a.tokenizer_dir);
      std::printf("decoded:    \"%s\"\n", escaped(tok.decode(head), 400).c_str());
    } catch (const Error& e) {
      std::printf("decoded:    (no tokenizer: %s)\n", e.what());
    }
  }
  std::printf("valid:      yes\n");
}

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

// A training config: resolved as `deltatron train --config` resolves it (load_config, the same
// errors), then the model it makes: layers, parameter count by part, decode memory per sequence.
void info_config(const InfoArgs& a) {
  const Config c = load_config(a.path, a.sets);
  const ModelConfig& m = c.model;
  const ParamCount params = count_params(m);  // throws, as the model would, when the layers reject cfg
  const DecodeMemory dec = decode_memory(m);
  // The MLA latent cache in fp8 (`generate --mla-cache fp8`), where the model has MLA layers that take it.
  const bool has_mla = std::count(m.layers.begin(), m.layers.end(), MixerKind::kMla) > 0;
  const bool fp8 = has_mla && mla_fp8_supported(m);
  const DecodeMemory dec8 = fp8 ? decode_memory(m, MlaCache::kFp8) : dec;
  if (a.json) {
    nlohmann::ordered_json j;
    j["config"] = a.path;
    j["layers"] = nlohmann::ordered_json::array();
    for (MixerKind k : m.layers) j["layers"].push_back(mixer_name(k));
    j["parameters"] = params.total;
    j["parameters_by_kind"] = nlohmann::ordered_json::object();
    for (const auto& [part, n] : params.by_part) j["parameters_by_kind"][part] = n;
    nlohmann::ordered_json per_seq = nlohmann::ordered_json::object();
    for (int64_t t : kDecodeContexts) per_seq[std::to_string(t)] = dec.bytes_per_sequence(t);
    j["decode"] = {{"state_bytes_per_sequence", dec.state_bytes_per_sequence},
                   {"cache_bytes_per_token", dec.cache_bytes_per_token},
                   {"bytes_per_sequence", per_seq}};
    if (has_mla) {  // null when kv_lora_rank does not take it
      nlohmann::ordered_json per_seq8 = nlohmann::ordered_json::object();
      for (int64_t t : kDecodeContexts) per_seq8[std::to_string(t)] = dec8.bytes_per_sequence(t);
      j["decode_mla_fp8"] = fp8 ? nlohmann::ordered_json{{"cache_bytes_per_token", dec8.cache_bytes_per_token},
                                                         {"bytes_per_sequence", per_seq8}}
                                : nlohmann::ordered_json();
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::string names, counts;
  for (MixerKind k : m.layers) names += fmt::format("{}{}", names.empty() ? "" : ", ", mixer_name(k));
  for (MixerKind k : {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla}) {
    const auto n = std::count(m.layers.begin(), m.layers.end(), k);
    if (n > 0) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", mixer_name(k), n);
  }
  std::printf("file:       %s\n", a.path.c_str());
  std::printf("kind:       training config (resolved as `deltatron train --config` resolves it), run %s\n",
              c.run.name.c_str());
  std::printf("layers:     %d: %s\n", m.n_layers(), names.c_str());
  std::printf("            %s; %s\n", layer_pattern_to_string(m.layers).c_str(), counts.c_str());
  std::printf("d_model:    %d\n", m.d_model);
  std::printf("d_ff:       %d (SwiGLU)\n", m.d_ff);
  std::printf("vocab:      %d\n", m.vocab_size);
  std::printf("embeddings: %s\n", m.tie_embeddings ? "tied (the LM head is model.embed_tokens.weight)"
                                                    : "untied (lm_head.weight of its own)");
  std::printf("parameters: %lld (%.2fM)\n", static_cast<long long>(params.total), params.total / 1e6);
  for (const auto& [part, n] : params.by_part)
    if (n > 0) std::printf("  %-10s %lld (%.2fM)\n", part.c_str(), static_cast<long long>(n), n / 1e6);
  std::printf("decode memory per sequence (bf16 caches, fp32 GDN states; layers/decode_memory.h):\n");
  std::printf("  state      %lld bytes (%s), independent of the context\n",
              static_cast<long long>(dec.state_bytes_per_sequence), mib(dec.state_bytes_per_sequence).c_str());
  std::printf("  cache      %lld bytes per token\n", static_cast<long long>(dec.cache_bytes_per_token));
  for (int64_t t : kDecodeContexts) {
    const int64_t b = dec.bytes_per_sequence(t);
    std::printf("  %-10s %lld bytes (%s)\n", fmt::format("{}K", t / 1024).c_str(), static_cast<long long>(b),
                mib(b).c_str());
  }
  for (const DecodeMemoryPart& p : dec.parts) {
    std::printf("  %-10s %s\n", mixer_name(p.kind), p.formula.c_str());
    if (p.state_bytes > 0)
      std::printf("             = %lld bytes at any context\n", static_cast<long long>(p.state_bytes));
    if (p.cache_bytes_per_token > 0)
      std::printf("             = %lld bytes per token\n", static_cast<long long>(p.cache_bytes_per_token));
  }
  if (has_mla && !fp8)
    std::printf("with --mla-cache fp8: not available (kv_lora_rank %d is not a multiple of %lld)\n", m.mla.kv_lora_rank,
                static_cast<long long>(kFp8Block));
  if (fp8) {
    std::printf("with --mla-cache fp8 (the MLA latent in fp8 e4m3, an fp32 scale per %lld values, the rope key bf16):\n",
                static_cast<long long>(kFp8Block));
    std::printf("  cache      %lld bytes per token\n", static_cast<long long>(dec8.cache_bytes_per_token));
    for (int64_t t : kDecodeContexts) {
      const int64_t b = dec8.bytes_per_sequence(t);
      std::printf("  %-10s %lld bytes (%s)\n", fmt::format("{}K", t / 1024).c_str(), static_cast<long long>(b),
                  mib(b).c_str());
    }
    for (const DecodeMemoryPart& p : dec8.parts)
      if (p.kind == MixerKind::kMla)
        std::printf("  %-10s %s\n             = %lld bytes per token\n", mixer_name(p.kind), p.formula.c_str(),
                    static_cast<long long>(p.cache_bytes_per_token));
  }
  std::printf("valid:      yes\n");
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Summary of a token shard, a checkpoint or a YAML training config, with its validity");
  cmd->footer(
      "A YAML config (.yaml, .yml) is resolved as `deltatron train --config` resolves it (--set applies), and\n"
      "the model it makes is shown: the layer pattern, the parameter count by part and the decode memory per\n"
      "sequence at 1K to 128K tokens of context, for a model with MLA layers also with `generate --mla-cache fp8`\n"
      "(--json: one JSON object; decode_mla_fp8 holds the fp8 figures).\n"
      "Example: deltatron info configs/hybrid_124m.yaml --json\n");
  cmd->add_option("file", args->path, "The file to describe")->required();
  cmd->add_option("--set", args->sets, "A config's override, as in `deltatron train`: --set model.d_ff=1024 "
                  "(repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json", args->json, "A config's summary as one JSON object");
  cmd->add_flag("--tensors", args->tensors, "A checkpoint's tensors: names, shapes and dtypes");
  cmd->add_option("--vocab-size", args->vocab_size, "Every token id must be below this")
      ->capture_default_str()
      ->check(CLI::TypeValidator<int>())
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--show", args->show, "How many tokens of a shard to show and decode")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--tokenizer", args->tokenizer_dir, "Directory with GPT-2's encoder.json and vocab.bpe")
      ->capture_default_str()
      ->check(CLI::ExistingDirectory);
  cmd->callback([args] {
    const FileKind kind = sniff_file_kind(args->path);
    if (kind != FileKind::kConfig) {
      DT_CHECK(args->sets.empty(), "--set applies to a YAML config (.yaml), and {} is not one", args->path);
      DT_CHECK(!args->json, "--json applies to a YAML config (.yaml), and {} is not one", args->path);
    }
    DT_CHECK(!args->tensors || kind == FileKind::kCheckpoint, "--tensors applies to a checkpoint, and {} is not one",
             args->path);
    switch (kind) {
      case FileKind::kConfig:
        info_config(*args);
        return;
      case FileKind::kShard:
        info_shard(*args);
        return;
      case FileKind::kShardDir:
        info_shard_dir(args->path);
        return;
      case FileKind::kCheckpoint:  // checkpoint_summary validates every checksum, or throws naming the problem
        std::fputs(checkpoint_summary(args->path).c_str(), stdout);
        if (args->tensors)
          for (const CheckpointTensorInfo& t : checkpoint_tensors(args->path))
            std::printf("  %-60s %-18s %s\n", t.name.c_str(), t.shape.str().c_str(), t.dtype.c_str());
        checkpoint_check_structure(args->path);  // as eval and --resume check it
        std::printf("valid:      yes\n");
        return;
      case FileKind::kHdf5:
        DT_FAIL("{} is an HDF5 file but not a Deltatron checkpoint (those start with a {} header); `deltatron info` "
                "reads token shards and the checkpoints `deltatron train` writes",
                args->path, kCheckpointMagic);
      case FileKind::kUnknown:
        DT_FAIL("{} is neither a token shard (first int32 {}), an HDF5 checkpoint nor a YAML config (.yaml); is it "
                "the right file?",
                args->path, kShardMagic);
    }
  });
}

}  // namespace dt
