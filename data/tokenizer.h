// The GPT-2 byte-level BPE tokenizer: exactly tiktoken's `gpt2` encoding, `encode_ordinary`.
//   text -> pieces (the GPT-2 regex, data/bpe_split.h) -> each piece's bytes merged by rank
//   (data/bpe_merge.h). Python equivalent: `tiktoken.get_encoding("gpt2").encode_ordinary(s)`.
// Any byte string encodes (invalid UTF-8 bytes are characters of their own) and
// decode(encode(s)) == s.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dt {

class Tokenizer {
 public:
  static constexpr int32_t kEot = 50256;  // <|endoftext|>

  // Reads `dir`/encoder.json and `dir`/vocab.bpe (OpenAI's GPT-2 files) and checks that they
  // agree, as tiktoken does. Throws dt::Error naming the file (and line) when one is missing
  // or malformed.
  static Tokenizer load(const std::string& dir);
  // $DELTATRON_ASSETS/gpt2 when that variable is set, else <source tree>/assets/gpt2.
  static std::string default_dir();

  Tokenizer() = default;  // empty: load() one before use

  // Ordinary text -> ids; special tokens are plain text. Thread-safe: each thread keeps its own
  // cache of merged pieces.
  std::vector<int32_t> encode(std::string_view text) const;
  // The same, appending to `out` (lets a caller reuse one buffer for many documents).
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;

  // ids -> bytes. An id outside [0, vocab_size) is a dt::Error naming the id and its position.
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes of one token (id in range, else dt::Error).
  std::string_view token_bytes(int32_t id) const;

  int32_t vocab_size() const;  // 50257

 private:
  struct Vocab;
  const Vocab& vocab() const;
  std::shared_ptr<const Vocab> vocab_;  // immutable once loaded; copies share it
};

}  // namespace dt
