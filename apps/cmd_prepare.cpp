// `deltatron prepare`: text / JSON lines -> token shards (data/prepare.h).
#include <charconv>
#include <cstdio>
#include <memory>

#include "apps/commands.h"
#include "core/error.h"
#include "data/jsonl.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "trainer/config.h"

namespace dt {

namespace {

struct PrepareArgs {
  PrepareOptions options;
  std::string tokenizer_dir = Tokenizer::default_dir();
};

// The automatic validation split holds enough tokens for the default config's evaluation.
void set_auto_val_split(PrepareOptions& o) {
  const TrainConfig t;
  o.auto_val_tokens = eval_tokens_needed(t);
  o.auto_val_source = fmt::format("the default evaluation's train.eval_batches x batch_size = {} x {} windows of {} + 1 tokens",
                                  t.eval_batches, t.batch_size, t.seq_len);
}

void print_summary(const PrepareSummary& s, std::FILE* out) {
  const int64_t train_docs = s.documents - s.val_documents;
  std::fprintf(out, "prepare: %lld documents (%.2f MB) -> %lld tokens in %zu shards, %.1f s\n",
               static_cast<long long>(s.documents), s.input_bytes / 1e6,
               static_cast<long long>(s.val_tokens + s.train_tokens), s.shards.size(), s.seconds);
  size_t first_train = 0;
  if (s.val_documents > 0) {
    std::fprintf(out, "  validation: the first %lld documents (%s), %lld tokens: %s\n",
                 static_cast<long long>(s.val_documents), s.val_rule.c_str(), static_cast<long long>(s.val_tokens),
                 s.shards.front().c_str());
    first_train = 1;
  } else {
    std::fprintf(out, "  validation: none (%s)\n", s.val_rule.c_str());
  }
  const size_t n_train = s.shards.size() - first_train;
  if (n_train == 0) {
    std::fprintf(out, "  train: none (every document went to validation)\n");
    return;
  }
  std::fprintf(out, "  train: %lld documents, %lld tokens in %zu shard%s: %s%s%s\n", static_cast<long long>(train_docs),
               static_cast<long long>(s.train_tokens), n_train, n_train == 1 ? "" : "s",
               s.shards[first_train].c_str(), n_train > 1 ? " .. " : "",
               n_train > 1 ? s.shards.back().c_str() : "");
  if (s.empty_skipped > 0) {
    std::fprintf(out, "  skipped %lld empty documents\n", static_cast<long long>(s.empty_skipped));
  }
  if (!s.manifest.empty()) std::fprintf(out, "  manifest: %s\n", s.manifest.c_str());
}

// A whole number >= 0. CLI11's NonNegativeNumber would say "not in range 0.000000 to 1.797...e308"
// (every digit of DBL_MAX); this says the rule. CLI11 prefixes the flag: "--val-docs: '-1' must be ...".
const CLI::Validator kWholeNumberAtLeastZero(
    [](std::string& text) -> std::string {
      long long v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) return "'" + text + "' is not a whole number";
      return v < 0 ? "'" + text + "' must be >= 0" : "";
    },
    "NONNEGATIVE");

}  // namespace

void add_prepare_command(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  PrepareOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand("prepare", "Tokenise text or JSON lines into token shards (llm.c's .bin format)");
  cmd->footer(
      "Inputs: FILE.jsonl / FILE.json are JSON lines, one object per line with a string field \"text\" (blank lines\n"
      "and empty texts are skipped); '-' reads JSON lines from standard input; any other file is one plain-text\n"
      "document. Each document is tokenised with GPT-2's BPE and preceded by <|endoftext|> (50256).\n"
      "Outputs: OUT/NAME_val_000000.bin holds the first documents (--val-docs, --val-tokens, or by default enough\n"
      "tokens for the default config's evaluation, at most a tenth of the documents); the rest fill\n"
      "OUT/NAME_train_000001.bin, ... of exactly --shard-tokens tokens each (the last one shorter); a document may\n"
      "continue from one train shard into the next, as in llm.c. The result is identical for any --threads.\n"
      "Example: deltatron prepare --input assets/fineweb-edu/fineweb_edu.jsonl --out shards/fineweb_edu");
  cmd->add_option("--input", o.inputs, "Input files: .jsonl/.json (JSON lines), '-' (JSON lines on stdin), or text")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--out", o.out_dir, "Output directory (created if missing)")->required();
  cmd->add_option("--val-docs", o.val_docs,
                  "Documents held out for validation (0: no validation shard; all of them: no train shard)")
      ->check(kWholeNumberAtLeastZero);
  cmd->add_option("--val-tokens", o.val_tokens,
                  "Tokens held out for validation: the first documents until they hold this many (default: enough "
                  "for the default config's evaluation, train.eval_batches x batch_size windows of seq_len + 1 "
                  "tokens, but at most a tenth of the documents)")
      ->check(kWholeNumberAtLeastZero);
  cmd->add_option("--shard-tokens", o.shard_tokens, "Tokens per train shard")->capture_default_str();
  cmd->add_option("--name", o.name, "Shard name prefix (default: the first input's file name without extension)");
  cmd->add_option("--threads", o.threads, "Tokeniser threads (default: all cores)")->check(kWholeNumberAtLeastZero);
  cmd->add_option("--tokenizer", args->tokenizer_dir, "Directory with GPT-2's encoder.json and vocab.bpe")
      ->capture_default_str();
  cmd->add_flag("--overwrite", o.overwrite, "Replace shards of the same name already in --out (once the new set is complete)");
  cmd->callback([args] {
    DT_CHECK(args->options.val_docs < 0 || args->options.val_tokens < 0,
             "--val-docs {} and --val-tokens {} both choose the validation split; pass one of them",
             args->options.val_docs, args->options.val_tokens);
    DocumentReader check_inputs_first(args->options.inputs);  // fail fast, before the tokenizer loads
    set_auto_val_split(args->options);
    const Tokenizer tokenizer = Tokenizer::load(args->tokenizer_dir);
    const EncodeFn encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text); };
    args->options.tokenizer_dir = args->tokenizer_dir;
    const PrepareSummary summary = prepare_shards(args->options, encode, stderr);
    print_summary(summary, stdout);
  });
}

}  // namespace dt
