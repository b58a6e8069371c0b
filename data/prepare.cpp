#include "data/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/sha256.h"
#include "data/jsonl.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "data/shard_set.h"

namespace dt {

namespace fs = std::filesystem;

std::string shard_file_name(const std::string& name, const std::string& split, int index) {
  return fmt::format("{}_{}_{:06d}.bin", name, split, index);
}

namespace {

// A batch is read, then tokenised by all threads: big enough to keep them busy, small enough for memory.
constexpr size_t kBatchDocs = 4096;
constexpr size_t kBatchBytes = size_t{32} << 20;

using Clock = std::chrono::steady_clock;

// Tokenises texts[i] into out[i] = [EOT, ids...] on `threads` threads, dynamically load-balanced.
std::vector<std::vector<uint16_t>> encode_batch(const std::vector<std::string>& texts, const EncodeFn& encode,
                                                int threads) {
  std::vector<std::vector<uint16_t>> out(texts.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < texts.size();) {
      try {
        std::vector<int32_t> ids = encode(texts[i]);
        std::vector<uint16_t>& doc = out[i];
        doc.reserve(ids.size() + 1);
        doc.push_back(static_cast<uint16_t>(kShardEot));
        for (int32_t id : ids) {
          DT_CHECK(id >= 0 && id <= 65535, "the tokenizer returned id {}, which does not fit a uint16 token shard",
                   id);
          doc.push_back(static_cast<uint16_t>(id));
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = texts.size();  // stop the others early
      }
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(texts.size())));
  {
    std::vector<std::jthread> pool;
    for (int t = 1; t < n; ++t) pool.emplace_back(work);
    work();
  }
  if (error) std::rethrow_exception(error);
  return out;
}

// Receives documents in input order and writes the shards. The validation shard is a prefix of the
// documents, closed (written) once it holds what the rule asks; the automatic rule holds documents
// back until it knows its prefix: the documents reaching auto_val_tokens, if they are at most a tenth
// of the input, else a tenth of the input (known at its end).
class ShardSink {
 public:
  // Writes into `dir` (the staging directory); summary.shards gets the paths in opt.out_dir.
  ShardSink(const PrepareOptions& opt, std::string name, std::string dir, PrepareSummary& summary)
      : opt_(opt), name_(std::move(name)), dir_(std::move(dir)), summary_(summary) {
    if (opt.val_docs >= 0) {
      val_docs_ = opt.val_docs;
      summary_.val_rule = fmt::format("--val-docs {}", opt.val_docs);
    } else if (opt.val_tokens >= 0) {
      val_tokens_ = opt.val_tokens;
      summary_.val_rule = fmt::format("--val-tokens {}: the first documents holding at least {} tokens",
                                      opt.val_tokens, opt.val_tokens);
    } else {
      DT_ASSERT(opt.auto_val_tokens > 0);
      automatic_ = true;
    }
  }

  void add(std::vector<uint16_t> doc) {
    ++summary_.documents;
    if (!automatic_) return route(doc);
    pending_tokens_ += static_cast<int64_t>(doc.size());
    pending_.push_back(std::move(doc));
    if (auto_docs_ == 0 && pending_tokens_ >= opt_.auto_val_tokens) auto_docs_ = static_cast<int64_t>(pending_.size());
    if (auto_docs_ > 0 && static_cast<int64_t>(pending_.size()) >= 10 * auto_docs_) decide(auto_docs_, false);
  }

  void finish() {
    const int64_t n = summary_.documents;
    DT_CHECK(n > 0, "no documents in the input{}; check the --input files",
             summary_.empty_skipped ? fmt::format(" (only {} empty texts)", summary_.empty_skipped) : "");
    if (automatic_) {
      DT_CHECK(n >= 2,
               "the input holds 1 document; a validation and a train split need at least 2 (or pass --val-docs 0 "
               "to make train shards only)");
      const int64_t tenth = std::max<int64_t>(1, n / 10);
      decide(auto_docs_ > 0 ? std::min(auto_docs_, tenth) : tenth, true);
    }
    check_val_complete();
    if (!train_.empty()) flush_train();
    summary_.val_documents = val_docs_in_;
  }

 private:
  // The automatic split is `docs` documents; `capped`: decided at the input's end.
  void decide(int64_t docs, bool capped) {
    automatic_ = false;
    val_docs_ = docs;
    const int64_t n = summary_.documents;
    if (!capped || docs == auto_docs_)
      summary_.val_rule = fmt::format("the default: at least {} tokens, for {}", opt_.auto_val_tokens,
                                      opt_.auto_val_source);
    else
      summary_.val_rule = fmt::format(
          "a tenth of the {} documents: the default, {} tokens for {}, would take {} of them; choose with "
          "--val-tokens or --val-docs",
          n, opt_.auto_val_tokens, opt_.auto_val_source,
          auto_docs_ > 0 ? fmt::format("{}", auto_docs_) : std::string("more than all"));
    for (auto& doc : pending_) route(doc);
    pending_.clear();
    pending_.shrink_to_fit();
  }

  bool val_open() const {
    if (val_closed_) return false;
    return val_docs_ >= 0 ? val_docs_in_ < val_docs_ : static_cast<int64_t>(val_.size()) < val_tokens_;
  }

  // The input ended before the validation shard held what --val-docs / --val-tokens asked for.
  void check_val_complete() const {
    if (val_closed_ || val_.empty()) return;
    if (val_docs_ >= 0)
      DT_FAIL("the input holds {} documents, fewer than the --val-docs {} asked for validation; pass --val-docs {} "
              "or fewer (equal to the documents: all of them go to validation and none to training)",
              summary_.documents, val_docs_, summary_.documents);
    DT_FAIL("the input holds {} tokens in {} documents, fewer than the --val-tokens {} asked for validation; pass a "
            "smaller --val-tokens, or --val-docs",
            val_.size(), summary_.documents, val_tokens_);
  }

  void route(const std::vector<uint16_t>& doc) {
    if (val_open()) {
      val_.insert(val_.end(), doc.begin(), doc.end());
      ++val_docs_in_;
      if (!val_open()) close_val();
      return;
    }
    // Fill train shards to exactly shard_tokens; the rest of the document opens the next shard.
    size_t at = 0;
    while (at < doc.size()) {
      const size_t room = static_cast<size_t>(opt_.shard_tokens) - train_.size();
      const size_t take = std::min(room, doc.size() - at);
      train_.insert(train_.end(), doc.begin() + at, doc.begin() + at + take);
      at += take;
      if (train_.size() == static_cast<size_t>(opt_.shard_tokens)) flush_train();
    }
  }

  void close_val() {
    write(shard_file_name(name_, "val", 0), val_);
    summary_.val_tokens = static_cast<int64_t>(val_.size());
    std::vector<uint16_t>().swap(val_);
    val_closed_ = true;
  }

  void flush_train() {
    write(shard_file_name(name_, "train", next_train_++), train_);
    summary_.train_tokens += static_cast<int64_t>(train_.size());
    train_.clear();
  }

  void write(const std::string& file, const std::vector<uint16_t>& tokens) {
    write_shard((fs::path(dir_) / file).string(), tokens);
    summary_.shards.push_back((fs::path(opt_.out_dir) / file).string());
  }

  const PrepareOptions& opt_;
  std::string name_;
  std::string dir_;
  PrepareSummary& summary_;
  // The rule: val_docs_ >= 0 counts documents, else val_tokens_ counts tokens; automatic_ until decided.
  int64_t val_docs_ = -1;
  int64_t val_tokens_ = 0;
  bool automatic_ = false;
  int64_t auto_docs_ = 0;       // automatic: the documents reaching auto_val_tokens (0: not yet)
  int64_t pending_tokens_ = 0;  // automatic: tokens in pending_
  std::vector<std::vector<uint16_t>> pending_;  // documents held while the automatic split is undecided
  int64_t val_docs_in_ = 0;
  bool val_closed_ = false;     // the validation shard is written (or was never opened)
  std::vector<uint16_t> val_;
  std::vector<uint16_t> train_;
  int next_train_ = 1;  // llm.c numbering: val 000000, train from 000001
};

std::string default_name(const std::string& first_input) {
  if (first_input == "-") return "data";
  std::string stem = fs::path(first_input).stem().string();
  return stem.empty() ? "data" : stem;
}

// Creates `dir`, checks that we can write in it and that shards of the same name already there may
// be replaced (they are replaced only once the new set is complete), and deletes the `.tmp` leftovers
// of an earlier prepare of this name that was killed.
void prepare_out_dir(const std::string& dir, const std::string& name, bool overwrite) {
  std::error_code ec;
  DT_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec),
           "--out {} exists and is not a directory; choose another --out", dir);
  fs::create_directories(dir, ec);
  DT_CHECK(!ec || fs::is_directory(dir), "cannot create the output directory {}: {}; choose another --out", dir,
           ec.message());
  DT_CHECK(fs::is_directory(dir), "--out {} exists and is not a directory; choose another --out", dir);
  std::string probe = (fs::path(dir) / ".deltatron_write_probe_XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  DT_CHECK(fd >= 0, "cannot write in the output directory {}: {}; choose a writable --out", dir,
           std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());

  remove_leftovers(dir, name);
  std::vector<fs::path> existing;
  for (const auto& entry : fs::directory_iterator(dir))
    if (is_set_shard(entry.path().filename().string(), name)) existing.push_back(entry.path());
  if (existing.empty()) return;
  DT_CHECK(overwrite,
           "the output directory {} already holds {} shard(s) named {}_*.bin (e.g. {}); pass --overwrite to replace "
           "them, or choose another --out or --name",
           dir, existing.size(), name, existing.front().filename().string());
}

// The set's manifest, written into `staging` beside its shards.
std::string write_set_manifest(const PrepareOptions& opt, const std::string& name, const std::string& staging,
                               const PrepareSummary& summary) {
  ShardManifest m = manifest_of_files(staging, name);
  DT_ASSERT(m.shards.size() == summary.shards.size());
  m.inputs = opt.inputs;
  if (!opt.tokenizer_dir.empty()) {
    const fs::path dir(opt.tokenizer_dir);
    if (fs::exists(dir / "encoder.json")) m.encoder_sha256 = sha256_file_hex((dir / "encoder.json").string());
    if (fs::exists(dir / "vocab.bpe")) m.vocab_sha256 = sha256_file_hex((dir / "vocab.bpe").string());
  }
  const std::string file = manifest_file_name(name);
  write_manifest((fs::path(staging) / file).string(), m);
  return file;
}

class Progress {
 public:
  explicit Progress(std::FILE* f)
      : f_(f), tty_(f != nullptr && ::isatty(::fileno(f))), start_(Clock::now()), last_print_(start_) {}
  ~Progress() {
    if (open_line_) std::fputc('\n', f_);  // so that an error message starts on its own line
  }

  void update(int64_t docs, int64_t tokens, uint64_t bytes, bool last) {
    if (f_ == nullptr) return;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_print_).count();
    if (!last && since < (tty_ ? 0.25 : 10.0)) return;
    last_print_ = now;
    const double secs = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
    std::fprintf(f_, "%sprepare: %lld documents, %.2fM tokens, %.1f MB/s%s", tty_ ? "\r" : "",
                 static_cast<long long>(docs), tokens / 1e6, bytes / 1e6 / secs, tty_ && !last ? "" : "\n");
    std::fflush(f_);
    open_line_ = tty_ && !last;
  }

 private:
  std::FILE* f_;
  bool tty_;
  bool open_line_ = false;
  Clock::time_point start_, last_print_;
};

}  // namespace

PrepareSummary prepare_shards(const PrepareOptions& opt, const EncodeFn& encode, std::FILE* progress) {
  const auto start = Clock::now();
  DT_CHECK(opt.shard_tokens >= 1 && opt.shard_tokens <= INT32_MAX,
           "--shard-tokens {} is out of range: a shard holds 1 to {} tokens (its header counts them in an int32)",
           opt.shard_tokens, INT32_MAX);
  DocumentReader reader(opt.inputs);  // checks the inputs first
  DT_CHECK(!opt.out_dir.empty(), "no output directory; pass --out DIR");
  const std::string name = opt.name.empty() ? default_name(opt.inputs.front()) : opt.name;
  DT_CHECK(name.find('/') == std::string::npos, "--name {} must be a file name prefix, without '/'", name);
  prepare_out_dir(opt.out_dir, name, opt.overwrite);
  const int threads = opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());

  PrepareSummary summary;
  const std::string staging = make_staging_dir(opt.out_dir, name);
  ShardSink sink(opt, name, staging, summary);
  Progress bar(progress);
  int64_t tokens = 0;
  try {
    std::vector<std::string> texts;
    std::string text;
    for (;;) {
      texts.clear();
      size_t bytes = 0;
      while (texts.size() < kBatchDocs && bytes < kBatchBytes && reader.next(text)) {
        bytes += text.size();
        texts.push_back(std::move(text));
      }
      if (texts.empty()) break;
      for (auto& doc : encode_batch(texts, encode, threads)) {
        tokens += static_cast<int64_t>(doc.size());
        sink.add(std::move(doc));
      }
      bar.update(summary.documents, tokens, reader.bytes_read(), false);
    }
    summary.empty_skipped = reader.empty_skipped();
    sink.finish();
    std::vector<std::string> files;
    for (const std::string& p : summary.shards) files.push_back(fs::path(p).filename().string());
    files.push_back(write_set_manifest(opt, name, staging, summary));  // renamed in last
    summary.manifest = (fs::path(opt.out_dir) / files.back()).string();
    swap_in_shard_set(opt.out_dir, name, staging, files);
  } catch (...) {
    // The staging directory holds this run's shards; the set already in --out is untouched.
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  bar.update(summary.documents, tokens, reader.bytes_read(), true);
  summary.input_bytes = reader.bytes_read();
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summary;
}

}  // namespace dt
