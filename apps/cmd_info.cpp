// `deltatron info FILE`: what a file is, and whether it is valid. Dispatches on the file's first
// bytes, so that new kinds (checkpoints, exports) slot in as one more case of FileKind.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "apps/commands.h"
#include "core/error.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "trainer/checkpoint.h"

namespace dt {

namespace {

enum class FileKind { kShard, kCheckpoint, kHdf5, kUnknown };

constexpr char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
// A Deltatron checkpoint starts with its 512-byte header (trainer/checkpoint.cpp); HDF5 follows it.
constexpr char kCheckpointMagic[] = "DELTATRON-CHECKPOINT";

struct InfoArgs {
  std::string path;
  int vocab_size = Tokenizer::kEot + 1;
  int show = 24;  // tokens shown (and decoded) from the start of a shard
  std::string tokenizer_dir = Tokenizer::default_dir();
};

// Reads the first bytes of `path` and says what kind of file it is; a file that cannot be read is an error.
FileKind sniff_file_kind(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  DT_CHECK(std::filesystem::exists(st), "{}: no such file", path);
  DT_CHECK(!std::filesystem::is_directory(st),
           "{} is a directory; `deltatron info` reads a token shard (.bin) or a checkpoint file", path);
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

}  // namespace

void add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Summary of a token shard or a checkpoint, with its validity");
  cmd->add_option("file", args->path, "The file to describe")->required();
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
    switch (sniff_file_kind(args->path)) {
      case FileKind::kShard:
        info_shard(*args);
        return;
      case FileKind::kCheckpoint:  // checkpoint_summary validates every checksum, or throws naming the problem
        std::fputs(checkpoint_summary(args->path).c_str(), stdout);
        std::printf("valid:      yes\n");
        return;
      case FileKind::kHdf5:
        DT_FAIL("{} is an HDF5 file but not a Deltatron checkpoint (those start with a {} header); `deltatron info` "
                "reads token shards and the checkpoints `deltatron train` writes",
                args->path, kCheckpointMagic);
      case FileKind::kUnknown:
        DT_FAIL("{} is neither a token shard (first int32 {}) nor an HDF5 checkpoint; is it the right file?",
                args->path, kShardMagic);
    }
  });
}

}  // namespace dt
