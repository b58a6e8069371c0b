#include "data/tokenizer.h"

#include <cstdlib>

#include "core/error.h"
#include "data/bpe_cache.h"
#include "data/bpe_merge.h"
#include "data/bpe_split.h"
#include "data/tokenizer_vocab.h"

#ifndef DELTATRON_SOURCE_DIR
#error "DELTATRON_SOURCE_DIR must be defined (CMake does it for every target)"
#endif

namespace dt {

std::string Tokenizer::default_dir() {
  const char* assets = std::getenv("DELTATRON_ASSETS");
  if (assets && *assets) return std::string(assets) + "/gpt2";
  return DELTATRON_SOURCE_DIR "/assets/gpt2";
}

const Tokenizer::Vocab& Tokenizer::vocab() const {
  DT_CHECK(vocab_, "tokenizer: used before loading; create it with dt::Tokenizer::load(dir)");
  return *vocab_;
}

int32_t Tokenizer::vocab_size() const { return vocab().size(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);  // English GPT-2 text averages ~4.5 bytes a token
  encode_append(text, ids);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  const Vocab& v = vocab();
  // One cache per thread (no locks); it belongs to one vocabulary at a time.
  thread_local PieceCache cache;
  cache.claim(v.serial);
  PieceSplitter splitter(text);
  std::string_view piece;
  while (splitter.next(piece)) {
    const uint64_t hash = hash_bytes(piece);
    const int32_t id = v.tokens.find(piece, hash);
    if (id >= 0) {  // tiktoken's shortcut, and the common case: the piece is a token
      out.push_back(id);
      continue;
    }
    const int32_t* ids;
    uint32_t count;
    if (cache.find(piece, hash, ids, count)) {
      out.insert(out.end(), ids, ids + count);
      continue;
    }
    const size_t before = out.size();
    bpe_merge(piece, v.byte_ids, v.pairs, out);
    cache.insert(piece, hash, out.data() + before, static_cast<uint32_t>(out.size() - before));
  }
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  const Vocab& v = vocab();
  DT_CHECK(id >= 0 && id < v.size(), "token id {} is outside the vocabulary [0, {})", id, v.size());
  return std::string_view(v.bytes).substr(v.offsets[id], v.offsets[id + 1] - v.offsets[id]);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  const Vocab& v = vocab();
  size_t total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    DT_CHECK(id >= 0 && id < v.size(),
             "decode: token id {} at position {} is outside the vocabulary [0, {})", id, i,
             v.size());
    total += v.offsets[id + 1] - v.offsets[id];
  }
  std::string out;
  out.reserve(total);
  for (const int32_t id : ids)
    out.append(v.bytes, v.offsets[id], v.offsets[id + 1] - v.offsets[id]);
  return out;
}

}  // namespace dt
