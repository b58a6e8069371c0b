// Tokenizer::load: OpenAI's encoder.json (token string -> id) and vocab.bpe (merges in rank
// order), in GPT-2's "data gym" alphabet where each byte is written as one printable character.
#include <atomic>
#include <climits>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/tokenizer_vocab.h"

namespace dt {

namespace {

constexpr const char* kFixHint =
    "pass --tokenizer DIR (a folder with OpenAI's GPT-2 encoder.json and vocab.bpe) or set "
    "DELTATRON_ASSETS";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in, "tokenizer: cannot open '{}' ({}); {}", path, std::strerror(errno), kFixHint);
  std::ostringstream ss;
  ss << in.rdbuf();
  DT_CHECK(!in.bad(), "tokenizer: error reading '{}'", path);
  return std::move(ss).str();
}

// GPT-2's bytes_to_unicode: bytes that print as themselves (tiktoken: chr(b).isprintable()
// and not a space) keep their code point; the other 68 map to U+0100.. in byte order.
// The one-byte tokens are ranked in that order: printable bytes first, then the rest.
struct ByteAlphabet {
  int16_t byte_of[256 + 68];  // code point -> byte, -1 when not in the alphabet
  uint8_t rank_order[256];    // rank -> byte
  ByteAlphabet() {
    std::fill(std::begin(byte_of), std::end(byte_of), int16_t{-1});
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                                        (b >= 0xAE && b <= 0xFF); };
    int r = 0, extra = 0;
    for (int b = 0; b < 256; ++b)
      if (printable(b)) byte_of[b] = int16_t(b), rank_order[r++] = uint8_t(b);
    for (int b = 0; b < 256; ++b)
      if (!printable(b)) byte_of[256 + extra++] = int16_t(b), rank_order[r++] = uint8_t(b);
  }
  // Data-gym string (UTF-8) -> raw bytes; false when a character is outside the alphabet.
  bool to_bytes(std::string_view s, std::string& out) const {
    out.clear();
    for (size_t i = 0; i < s.size();) {
      const auto c0 = static_cast<uint8_t>(s[i]);
      uint32_t cp;
      if (c0 < 0x80) {
        cp = c0, i += 1;
      } else if ((c0 & 0xE0) == 0xC0 && i + 1 < s.size()) {
        cp = ((c0 & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu), i += 2;
      } else {
        return false;  // every character of the alphabet is below U+0144: 1 or 2 UTF-8 bytes
      }
      if (cp >= std::size(byte_of) || byte_of[cp] < 0) return false;
      out.push_back(static_cast<char>(byte_of[cp]));
    }
    return !out.empty();
  }
};

// encoder.json's entries in file order, read with a SAX handler: a DOM would build a 50k-node
// std::map only to walk it once. Anything but one flat object of integers stops the parse.
struct EncoderSax : nlohmann::json_sax<nlohmann::json> {
  std::vector<std::pair<std::string, int64_t>> entries;
  std::string key_, problem;
  int depth = 0;

  bool fail(std::string what) {
    problem = std::move(what);
    return false;
  }
  bool value(int64_t v) {
    if (depth != 1) return fail("a number outside the top-level object");
    entries.emplace_back(std::move(key_), v);
    return true;
  }
  bool not_an_id(const std::string& what) {
    return fail(fmt::format("the value of key \"{}\" is {}, not an integer token id", key_, what));
  }
  bool null() override { return not_an_id("null"); }
  bool boolean(bool) override { return not_an_id("a boolean"); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return v > uint64_t(INT64_MAX) ? not_an_id(std::to_string(v)) : value(int64_t(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return not_an_id(std::to_string(v)); }
  bool string(string_t& v) override { return not_an_id("the string \"" + v + "\""); }
  bool binary(binary_t&) override { return not_an_id("binary"); }
  bool start_object(std::size_t) override {
    return ++depth == 1 ? true : not_an_id("an object");
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return --depth >= 0; }
  bool start_array(std::size_t) override {
    return depth == 0 ? fail("an array, not an object") : not_an_id("an array");
  }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(fmt::format("not valid JSON ({})", e.what()));
  }
};

// encoder.json -> id -> bytes (for every id in [0, n)).
std::vector<std::string> read_encoder(const std::string& path, const ByteAlphabet& alpha) {
  const std::string text = read_file(path);
  EncoderSax sax;
  const bool ok = nlohmann::json::sax_parse(text, &sax);
  DT_CHECK(ok && sax.problem.empty(),
           "tokenizer: '{}' must be a JSON object mapping token strings to integer ids: {}; {}",
           path, sax.problem.empty() ? "not valid JSON" : sax.problem, kFixHint);
  DT_CHECK(!sax.entries.empty(), "tokenizer: '{}' must be a JSON object mapping token strings to "
           "integer ids, not an empty one or a bare value; {}", path, kFixHint);
  const size_t n = sax.entries.size();
  DT_CHECK(n == size_t(Tokenizer::kEot) + 1,
           "tokenizer: '{}' has {} entries; GPT-2's encoder.json has {} (ids 0..{}); {}", path, n,
           Tokenizer::kEot + 1, Tokenizer::kEot, kFixHint);
  std::vector<std::string> by_id(n);
  std::vector<bool> seen(n, false);
  std::string bytes;
  for (const auto& [key, id] : sax.entries) {
    DT_CHECK(id >= 0 && id < int64_t(n), "tokenizer: '{}': key \"{}\" has id {}, outside [0, {})",
             path, key, id, n);
    DT_CHECK(!seen[id], "tokenizer: '{}': id {} is used twice (again by key \"{}\")", path, id, key);
    seen[id] = true;
    if (key == "<|endoftext|>") {
      DT_CHECK(id == Tokenizer::kEot, "tokenizer: '{}': <|endoftext|> has id {}, expected {}",
               path, id, Tokenizer::kEot);
      by_id[id] = key;  // a special token: its bytes are its text
      continue;
    }
    DT_CHECK(alpha.to_bytes(key, bytes), "tokenizer: '{}': key \"{}\" (id {}) is not written in "
             "GPT-2's byte alphabet (bytes_to_unicode)", path, key, id);
    by_id[id] = bytes;
  }
  DT_CHECK(!by_id[Tokenizer::kEot].empty(), "tokenizer: '{}' has no \"<|endoftext|>\" entry",
           path);
  return by_id;
}

// vocab.bpe must agree with encoder.json the way tiktoken's data_gym_to_mergeable_bpe_ranks
// asserts: one-byte tokens ranked in alphabet order, then merge i makes the token of id 256 + i.
void check_merges(const std::string& path, const std::string& enc_path,
                  const std::vector<std::string>& by_id, const ByteAlphabet& alpha) {
  for (int r = 0; r < 256; ++r)
    DT_CHECK(by_id[r].size() == 1 && static_cast<uint8_t>(by_id[r][0]) == alpha.rank_order[r],
             "tokenizer: '{}': id {} should be the one-byte token for byte {} in GPT-2's order",
             enc_path, r, alpha.rank_order[r]);
  const std::string text = read_file(path);
  std::istringstream in(text);
  std::string line, a, b;
  size_t line_no = 0;
  int32_t next_id = 256;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1) {
      DT_CHECK(line.rfind("#version", 0) == 0,
               "tokenizer: '{}' line 1 should be the '#version: 0.2' header, got \"{}\"; {}", path,
               line.substr(0, 80), kFixHint);
      continue;
    }
    if (line.empty() && in.peek() == EOF) break;  // the file's final newline
    const size_t sp = line.find(' ');
    DT_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() &&
                 line.find(' ', sp + 1) == std::string::npos,
             "tokenizer: '{}' line {}: expected a merge \"LEFT RIGHT\", got \"{}\"", path, line_no,
             line.substr(0, 80));
    DT_CHECK(next_id < Tokenizer::kEot, "tokenizer: '{}' line {}: more merges than the {} ids of "
             "'{}' allow", path, line_no, Tokenizer::kEot - 256, enc_path);
    DT_CHECK(alpha.to_bytes(std::string_view(line).substr(0, sp), a) &&
                 alpha.to_bytes(std::string_view(line).substr(sp + 1), b),
             "tokenizer: '{}' line {}: \"{}\" is not written in GPT-2's byte alphabet", path,
             line_no, line);
    DT_CHECK(a + b == by_id[next_id], "tokenizer: '{}' line {}: merge \"{}\" does not make token "
             "{} of '{}' (the files do not belong together)", path, line_no, line, next_id,
             enc_path);
    ++next_id;
  }
  DT_CHECK(line_no >= 1, "tokenizer: '{}' is empty; {}", path, kFixHint);
  DT_CHECK(next_id == Tokenizer::kEot, "tokenizer: '{}' has {} merges; '{}' needs {}", path,
           next_id - 256, enc_path, Tokenizer::kEot - 256);
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& dir) {
  static const ByteAlphabet alpha;
  static std::atomic<uint64_t> serials{0};
  const std::string enc_path = dir + "/encoder.json", bpe_path = dir + "/vocab.bpe";
  const std::vector<std::string> by_id = read_encoder(enc_path, alpha);
  check_merges(bpe_path, enc_path, by_id, alpha);

  auto v = std::make_shared<Vocab>();
  v->serial = ++serials;
  v->offsets.reserve(by_id.size() + 1);
  v->offsets.push_back(0);
  for (const std::string& s : by_id) {
    v->bytes += s;
    v->offsets.push_back(static_cast<uint32_t>(v->bytes.size()));
  }
  for (int r = 0; r < 256; ++r) v->byte_ids[alpha.rank_order[r]] = r;
  v->tokens.build(v->bytes, v->offsets, kEot);
  // Every split of every token into two tokens (see data/bpe_index.h for why not just merges).
  for (int32_t id = 256; id < kEot; ++id) {
    const std::string_view s = by_id[id];
    for (size_t k = 1; k < s.size(); ++k) {
      const int32_t left = v->tokens.find(s.substr(0, k)), right = v->tokens.find(s.substr(k));
      if (left >= 0 && right >= 0) v->pairs.insert(left, right, id);
    }
  }
  Tokenizer t;
  t.vocab_ = std::move(v);
  return t;
}

}  // namespace dt
