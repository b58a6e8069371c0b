#include "hf/export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/qwen35.h"
#include "io/safetensors.h"
#include "layers/model.h"
#include "trainer/checkpoint_format.h"
#include "trainer/train_checkpoint.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEot = "<|endoftext|>";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes and fsyncs a whole file.
void write_file(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DT_CHECK(fd >= 0, "{}: cannot create: {}", path, std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      DT_FAIL("{}: write failed: {}", path, std::strerror(err));
    }
    done += static_cast<size_t>(w);
  }
  const bool synced = ::fsync(fd) == 0;
  DT_CHECK(::close(fd) == 0 && synced, "{}: cannot flush to disk: {}", path, std::strerror(errno));
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string json_text(const nlohmann::ordered_json& j) { return j.dump(2) + "\n"; }

// --out as an absolute path without a trailing separator ("hf/" and "hf" are the same directory).
fs::path out_dir(const std::string& out) {
  fs::path p = fs::absolute(fs::path(out)).lexically_normal();
  if (p.filename().empty() && p != p.root_path()) p = p.parent_path();
  return p;
}

// --out may be new, an empty directory, or (with force) a directory holding an earlier export.
void check_out(const HfExportOptions& o, const fs::path& out) {
  const fs::path parent = out.parent_path();
  std::error_code ec;
  DT_CHECK(fs::is_directory(parent, ec), "--out {}: its parent directory {} does not exist; create it first", o.out,
           parent.string());
  if (!fs::exists(fs::symlink_status(out, ec))) return;
  DT_CHECK(fs::is_directory(fs::symlink_status(out, ec)),
           "--out {} exists and is not a directory; choose a new directory name", o.out);
  if (fs::is_empty(out, ec)) return;
  DT_CHECK(o.force, "--out {} exists and is not empty; pass --force to replace an earlier export there, or choose a "
           "new directory", o.out);
  DT_CHECK(fs::is_regular_file(out / "config.json", ec) && fs::is_regular_file(out / "model.safetensors", ec),
           "--out {} is not empty and does not hold an earlier export (config.json and model.safetensors); --force "
           "replaces only an export, so choose a new directory",
           o.out);
}

// The tokenizer files, from GPT-2's encoder.json and vocab.bpe (the same files under Hugging Face's names).
struct TokenizerFiles {
  std::string vocab_json, merges_txt;
};

TokenizerFiles read_tokenizer(const std::string& dir) {
  TokenizerFiles t{read_file(dir + "/encoder.json"), read_file(dir + "/vocab.bpe")};
  const nlohmann::json enc = nlohmann::json::parse(t.vocab_json, nullptr, false);
  DT_CHECK(enc.is_object() && enc.size() == static_cast<size_t>(kGpt2Vocab) && enc.value(kEot, -1) == kGpt2Vocab - 1,
           "{}/encoder.json is not GPT-2's encoder ({} entries with {} = {}); see assets/gpt2/SOURCES.md", dir,
           kGpt2Vocab, kEot, kGpt2Vocab - 1);
  DT_CHECK(t.merges_txt.rfind("#version: 0.2", 0) == 0,
           "{}/vocab.bpe is not GPT-2's merges file (first line '#version: 0.2'); see assets/gpt2/SOURCES.md", dir);
  return t;
}

nlohmann::ordered_json tokenizer_config(int max_len) {
  nlohmann::ordered_json special = {{"content", kEot}, {"lstrip", false}, {"normalized", true},
                                    {"rstrip", false}, {"single_word", false}, {"special", true}};
  return {{"tokenizer_class", "GPT2Tokenizer"},
          {"add_bos_token", false},
          {"add_prefix_space", false},
          {"bos_token", kEot},
          {"eos_token", kEot},
          {"unk_token", kEot},
          {"clean_up_tokenization_spaces", false},
          {"errors", "replace"},
          {"model_max_length", max_len},
          {"added_tokens_decoder", {{std::to_string(kGpt2Vocab - 1), special}}}};
}

// Removes the temporary directory unless released (the export succeeded).
class TempDir {
 public:
  explicit TempDir(fs::path p) : path_(std::move(p)) {
    std::error_code ec;
    fs::remove_all(path_, ec);  // a leftover of this pid's earlier crash
    DT_CHECK(fs::create_directory(path_, ec), "{}: cannot create: {}", path_.string(), ec.message());
  }
  ~TempDir() {
    std::error_code ec;
    if (!released_) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  void release() { released_ = true; }

 private:
  fs::path path_;
  bool released_ = false;
};

// Renames `tmp` to `out`; an empty `out` is removed first, an earlier export is moved aside and deleted.
void move_into_place(TempDir& tmp, const fs::path& out) {
  std::error_code ec;
  const fs::path old = out.parent_path() / fmt::format(".{}.export-old.{}", out.filename().string(), ::getpid());
  bool moved_aside = false;
  if (fs::exists(fs::symlink_status(out, ec))) {
    if (fs::is_empty(out, ec)) {
      fs::remove(out, ec);
    } else {
      fs::rename(out, old, ec);
      DT_CHECK(!ec, "--out {}: cannot move the earlier export aside: {}", out.string(), ec.message());
      moved_aside = true;
    }
  }
  fs::rename(tmp.path(), out, ec);
  if (ec) {
    std::error_code ignored;
    if (moved_aside) fs::rename(old, out, ignored);
    DT_FAIL("--out {}: cannot rename {} into place: {}", out.string(), tmp.path().string(), ec.message());
  }
  tmp.release();
  fsync_dir(out.parent_path());
  if (moved_aside) fs::remove_all(old, ec);
}

}  // namespace

HfExportResult export_hf(const HfExportOptions& o) {
  DT_CHECK(!o.checkpoint.empty(), "export needs --checkpoint FILE, e.g. --checkpoint "
           "runs/quickstart/checkpoints/step_00000150.h5");
  DT_CHECK(o.dtype == DType::kF32 || o.dtype == DType::kBF16, "export writes float32 or bfloat16 weights, not {}",
           dtype_name(o.dtype));
  DT_CHECK(!o.out.empty(), "export needs --out DIR, the directory to write");
  const fs::path out = out_dir(o.out);
  check_out(o, out);

  // The checkpoint: its checksum and attributes, its stored config, then (below) its /params tensors,
  // each checked by name, shape and checksum against the stored config's model. (Each open hashes
  // the whole file, so the optimizer's groups, which the export does not read, are not checked.)
  const CheckpointState state = checkpoint_read_state(o.checkpoint);
  const Config cfg = checkpoint_config(o.checkpoint, state);
  const ModelConfig& m = cfg.model;
  Qwen35ExportInfo info;
  info.dtype = o.dtype == DType::kBF16 ? "bfloat16" : "float32";
  info.max_position_embeddings = cfg.train.seq_len;
  nlohmann::ordered_json config;
  try {
    config = qwen35_config_json(m, info);  // refuses what Qwen3.5 cannot express
  } catch (const Error& e) {
    DT_FAIL("checkpoint {}: {}", o.checkpoint, e.what());
  }
  DT_CHECK(m.vocab_size >= kGpt2Vocab,
           "checkpoint {}: model.vocab_size {} is smaller than GPT-2's {} tokens, so the exported tokenizer would "
           "give ids the model has no embedding for; only models with vocab_size >= {} export",
           o.checkpoint, m.vocab_size, kGpt2Vocab, kGpt2Vocab);
  const TokenizerFiles tok = read_tokenizer(o.tokenizer_dir);

  std::vector<ParamInfo> infos;
  try {
    infos = Model::param_infos(m);
  } catch (const Error& e) {
    DT_FAIL("checkpoint {}: its stored config cannot make a model: {}", o.checkpoint, e.what());
  }
  std::vector<std::vector<float>> master(infos.size());
  CheckpointGroup group{"params", {}};
  for (size_t i = 0; i < infos.size(); ++i) {
    const Shape shape = infos[i].full_shape.ndim > 0 ? infos[i].full_shape : infos[i].shape;
    master[i].resize(static_cast<size_t>(shape.numel()));
    group.tensors.push_back({infos[i].name, Tensor(master[i].data(), DType::kF32, Device::kCPU, shape)});
  }
  checkpoint_load_group(o.checkpoint, group);  // names, shapes and SHA-256 checked

  HfExportResult r;
  r.step = state.step;
  std::vector<std::vector<uint16_t>> bf16(o.dtype == DType::kBF16 ? infos.size() : 0);
  std::vector<SafetensorsEntry> entries;
  for (size_t i = 0; i < infos.size(); ++i) {
    const void* data = master[i].data();
    if (o.dtype == DType::kBF16) {
      bf16[i].resize(master[i].size());
      for (size_t k = 0; k < master[i].size(); ++k) bf16[i][k] = f32_to_bf16(master[i][k]);
      data = bf16[i].data();
    }
    entries.push_back({infos[i].name, o.dtype, group.tensors[i].tensor.shape.vec(), data});
    r.parameters += group.tensors[i].tensor.numel();
    if (o.dtype == DType::kBF16) std::vector<float>().swap(master[i]);  // the fp32 copy is no longer needed
  }
  r.tensors = static_cast<int64_t>(entries.size());

  TempDir tmp(out.parent_path() / fmt::format(".{}.export-tmp.{}", out.filename().string(), ::getpid()));
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"deltatron_checkpoint_step", std::to_string(state.step)}};
  write_safetensors((tmp.path() / "model.safetensors").string(), entries, metadata);
  r.bytes = static_cast<int64_t>(fs::file_size(tmp.path() / "model.safetensors"));
  write_file(tmp.path() / "config.json", json_text(config));
  const nlohmann::ordered_json generation = {{"bos_token_id", info.bos_token_id},
                                             {"eos_token_id", info.eos_token_id},
                                             {"pad_token_id", info.eos_token_id}};
  write_file(tmp.path() / "generation_config.json", json_text(generation));
  write_file(tmp.path() / "vocab.json", tok.vocab_json);
  write_file(tmp.path() / "merges.txt", tok.merges_txt);
  write_file(tmp.path() / "tokenizer_config.json", json_text(tokenizer_config(info.max_position_embeddings)));
  write_file(tmp.path() / "special_tokens_map.json",
             json_text({{"bos_token", kEot}, {"eos_token", kEot}, {"unk_token", kEot}}));
  fsync_dir(tmp.path());
  move_into_place(tmp, out);
  return r;
}

}  // namespace dt
