// `deltatron prepare`: documents (data/jsonl.h) -> token shards (data/shard.h), streamed.
//
// Each document becomes [EOT, ids...]. The first documents form the validation shard
// <name>_val_000000.bin (how many: PrepareOptions); the rest fill train shards
// <name>_train_000001.bin, ... of exactly shard_tokens tokens (the last one shorter). As in llm.c,
// a document that does not fit the rest of a train shard continues at the start of the next one
// (the loader's windows never cross shards, so nothing is lost but the tail of each shard).
// Documents are tokenised in parallel and emitted in input order, so the output is byte-identical
// for any thread count.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dt {

// Text -> GPT-2 token ids, without EOT. Called from several threads at once: must be thread-safe.
using EncodeFn = std::function<std::vector<int32_t>(std::string_view)>;

struct PrepareOptions {
  std::vector<std::string> inputs;  // see data/jsonl.h for formats
  std::string out_dir;
  std::string name;                  // shard file prefix; empty: the first input's stem ("data" for stdin)
  // The validation split: the first val_docs documents when val_docs >= 0 (0: no validation shard;
  // all of them: no train shard); else, when val_tokens >= 0, the first documents that hold at least
  // val_tokens tokens; else automatic: the first documents holding auto_val_tokens, but at most a
  // tenth of the documents (at least one), so that a small input still trains.
  int64_t val_docs = -1;
  int64_t val_tokens = -1;
  int64_t auto_val_tokens = 0;       // the automatic target (> 0 when neither of the above is given)
  std::string auto_val_source;       // what the automatic target is sized for, for the summary
  int64_t shard_tokens = 100'000'000;
  int threads = 0;                   // 0: all cores
  std::string tokenizer_dir;         // its encoder.json / vocab.bpe are hashed into the manifest (data/manifest.h)
  bool overwrite = false;            // replace existing <name>_val_*/<name>_train_* shards (on success only)
};

struct PrepareSummary {
  int64_t documents = 0;        // non-empty documents read
  int64_t empty_skipped = 0;    // empty documents (texts "") left out
  int64_t val_documents = 0;
  int64_t val_tokens = 0;       // EOTs included
  int64_t train_tokens = 0;
  uint64_t input_bytes = 0;
  double seconds = 0;
  std::string val_rule;         // how val_documents was chosen, for the summary line
  std::vector<std::string> shards;  // written, in order (validation first)
  std::string manifest;             // <out>/<name>.manifest.json
};

// Runs the whole preparation. `progress` (may be nullptr) gets a progress line: updated in place
// with '\r' on a terminal, a line every 10 s otherwise. The shards are written into a staging
// directory and swapped in at the end (data/shard_set.h). Throws dt::Error on any bad input; the
// shards this run wrote are then removed and a set already in out_dir is left as it was.
PrepareSummary prepare_shards(const PrepareOptions& options, const EncodeFn& encode, std::FILE* progress);

// "<name>_<split>_<index, 6 digits>.bin" as llm.c names them.
std::string shard_file_name(const std::string& name, const std::string& split, int index);

}  // namespace dt
