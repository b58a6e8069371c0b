// The GPT-2 tokenizer against tiktoken's output (vectors written by
// scripts/make_tokenizer_vectors.py), plus round trips, invalid UTF-8, bad ids and bad files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "data/bpe_merge.h"
#include "data/bpe_split.h"
#include "data/tokenizer.h"

namespace dt {
namespace {

namespace fs = std::filesystem;

const std::string kVectors = DELTATRON_TEST_DATA_DIR "/data/tokenizer_vectors";
const std::string kBundledEdu = DELTATRON_SOURCE_DIR "/assets/fineweb-edu/fineweb_edu.jsonl";
const std::string kBundledFineweb = DELTATRON_SOURCE_DIR "/assets/fineweb/fineweb_legal_subset.jsonl.xz";

std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  const bool ok = n == 0;
  gzclose(f);
  if (!ok) throw std::runtime_error("gzread failed on " + path);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::move(ss).str();
}

// The whole output of `xz -dc path` (xz-utils is part of every Debian system).
std::string read_xz(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(("xz -dc -- '" + path + "'").c_str(), "r"), ::pclose);
  if (!p) throw std::runtime_error("cannot run xz -dc on " + path);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p.get())) > 0) out.append(buf, n);
  if (::pclose(p.release()) != 0) throw std::runtime_error("xz -dc failed on " + path);
  return out;
}

// JSON lines with a "text" field, from a plain or an .xz file.
std::vector<std::string> read_jsonl_texts(const std::string& path) {
  std::vector<std::string> texts;
  std::istringstream in(path.ends_with(".xz") ? read_xz(path) : read_file(path));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return texts;
}

std::string ids_digest(const std::vector<int32_t>& ids) {  // little-endian int32, as the script
  static_assert(std::endian::native == std::endian::little);
  return sha256_hex(ids.data(), ids.size() * sizeof(int32_t));
}

std::string show(const std::vector<int32_t>& ids, size_t at) {  // ids around a mismatch
  std::string s;
  for (size_t i = at >= 5 ? at - 5 : 0; i < std::min(ids.size(), at + 6); ++i)
    s += i == at ? fmt::format("[{}] ", ids[i]) : fmt::format("{} ", ids[i]);
  return s;
}

// Fails with the first differing position instead of two 100k-element dumps.
void expect_same_ids(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                     const std::string& what) {
  if (got == want) return;
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  ADD_FAILURE() << what << ": ids differ at position " << i << " (got " << got.size()
                << " ids, tiktoken " << want.size() << ")\n  got:      " << show(got, i)
                << "\n  tiktoken: " << show(want, i);
}

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = new Tokenizer(Tokenizer::load(Tokenizer::default_dir())); }
  static void TearDownTestSuite() { delete tok_; }
  static const Tokenizer& tok() { return *tok_; }

  // Encodes every text, compares each with its tiktoken count + digest, checks the round trip.
  static void check_digests(const std::string& source, const std::string& digests) {
    if (!fs::exists(source)) GTEST_SKIP() << source << " is absent";
    const std::vector<std::string> texts = read_jsonl_texts(source);
    std::istringstream in(read_gz(kVectors + "/" + digests));
    size_t n_checked = 0;
    for (size_t d = 0; d < texts.size(); ++d) {
      size_t want_n;
      std::string want_sha;
      ASSERT_TRUE(in >> want_n >> want_sha) << digests << " has fewer lines than " << source;
      const std::vector<int32_t> ids = tok().encode(texts[d]);
      EXPECT_EQ(ids.size(), want_n) << source << " document " << d;
      EXPECT_EQ(ids_digest(ids), want_sha) << source << " document " << d;
      ASSERT_EQ(tok().decode(ids), texts[d]) << source << " document " << d;
      ++n_checked;
    }
    std::string extra;
    EXPECT_FALSE(in >> extra) << digests << " has more lines than " << source << " has documents";
    EXPECT_GT(n_checked, 0u);
  }

  static Tokenizer* tok_;
};
Tokenizer* TokenizerTest::tok_ = nullptr;

// Per document of the fineweb-edu file: uint32 n, n int32 ids.
std::vector<std::vector<int32_t>> read_edu_vectors() {
  const std::string blob = read_gz(kVectors + "/fineweb_edu.ids.gz");
  std::vector<std::vector<int32_t>> docs;
  for (size_t at = 0; at < blob.size();) {
    uint32_t n;
    std::memcpy(&n, blob.data() + at, 4);
    at += 4;
    std::vector<int32_t> ids(n);
    std::memcpy(ids.data(), blob.data() + at, size_t(n) * 4);
    at += size_t(n) * 4;
    docs.push_back(std::move(ids));
  }
  return docs;
}

TEST_F(TokenizerTest, VocabularyBasics) {
  EXPECT_EQ(tok().vocab_size(), 50257);
  EXPECT_EQ(tok().token_bytes(Tokenizer::kEot), "<|endoftext|>");
  EXPECT_EQ(tok().token_bytes(0), "!");
  EXPECT_EQ(tok().token_bytes(220), " ");   // the first non-printable byte after the 188 printable
  EXPECT_EQ(tok().token_bytes(188), std::string(1, '\0'));
  EXPECT_EQ(tok().token_bytes(464), "The");  // known GPT-2 ids
  EXPECT_EQ(tok().token_bytes(262), " the");
  EXPECT_EQ(tok().encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_TRUE(tok().encode("").empty());
}

TEST_F(TokenizerTest, FinewebEduMatchesTiktokenExactly) {
  const std::string source = kBundledEdu;
  const auto texts = read_jsonl_texts(source);
  const auto want = read_edu_vectors();
  ASSERT_EQ(texts.size(), want.size()) << source;
  for (size_t d = 0; d < texts.size(); ++d) {
    const auto got = tok().encode(texts[d]);
    expect_same_ids(got, want[d], source + " document " + std::to_string(d));
    ASSERT_EQ(tok().decode(got), texts[d]);
  }
}

TEST_F(TokenizerTest, NastyStringsMatchTiktokenExactly) {
  std::istringstream in(read_gz(kVectors + "/nasty.jsonl.gz"));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text");
    const std::vector<int32_t> want = j.at("ids");
    const auto got = tok().encode(text);
    expect_same_ids(got, want, "nasty string " + j.at("name").get<std::string>());
    EXPECT_EQ(tok().decode(got), text) << j.at("name");
    ++n;
  }
  EXPECT_GT(n, 400u);
}

TEST_F(TokenizerTest, FinewebLegalMatchesTiktokenDigests) {
  check_digests(kBundledFineweb, "fineweb_legal.digests.gz");
}

TEST_F(TokenizerTest, CommonCrawlMatchesTiktokenDigests) {
  // allenai/dolma's raw Common Crawl test fixture (CC-MAIN-20190717121559-20190717143559-00140.jsonl),
  // which the repository does not ship: named by DELTATRON_COMMONCRAWL_JSONL, else skipped.
  const char* path = std::getenv("DELTATRON_COMMONCRAWL_JSONL");
  if (!path) GTEST_SKIP() << "set DELTATRON_COMMONCRAWL_JSONL to the Common Crawl fixture to run this check";
  check_digests(path, "commoncrawl.digests.gz");
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18)), s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// Every assigned code point (Python's Unicode) in a template that shows its class: segment by
// segment against tiktoken, so a wrong letter/number/space class names its code point range.
TEST_F(TokenizerTest, UnicodeSweepMatchesTiktoken) {
  const auto j = nlohmann::json::parse(read_gz(kVectors + "/unicode_sweep.json.gz"));
  const std::string templ = j.at("template");
  std::vector<uint32_t> cps;
  for (const auto& r : j.at("ranges"))
    for (uint32_t cp = r[0]; cp <= r[1].get<uint32_t>(); ++cp) cps.push_back(cp);
  const size_t seg = j.at("segment");
  size_t i = 0;
  for (const auto& s : j.at("segments")) {
    std::string text;
    for (size_t k = i; k < std::min(cps.size(), i + seg); ++k)
      for (const char c : templ) text += c == '\0' ? utf8(cps[k]) : std::string(1, c);
    const auto ids = tok().encode(text);
    EXPECT_EQ(ids.size(), s.at("tokens").get<size_t>()) << "code points U+" << std::hex << cps[i];
    EXPECT_EQ(ids_digest(ids), s.at("sha256").get<std::string>())
        << "code points U+" << std::hex << s.at("first").get<uint32_t>() << "..U+"
        << s.at("last").get<uint32_t>();
    EXPECT_EQ(tok().decode(ids), text);
    i += seg;
  }
  EXPECT_GE(i, cps.size()) << "fewer segments than code points";
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  PieceSplitter s(text);
  std::string_view piece;
  while (s.next(piece)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerSplit, FollowsTheGpt2Pattern) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("don't"), (Pieces{"don", "'t"}));
  EXPECT_EQ(split("DON'T"), (Pieces{"DON", "'", "T"}));
  EXPECT_EQ(split("x   y"), (Pieces{"x", "  ", " y"}));
  EXPECT_EQ(split("x \n y"), (Pieces{"x", " \n", " y"}));
  EXPECT_EQ(split("a\nb"), (Pieces{"a", "\n", "b"}));
  EXPECT_EQ(split("a  \n\nb"), (Pieces{"a", "  \n", "\n", "b"}));
  EXPECT_EQ(split("end  "), (Pieces{"end", "  "}));
  EXPECT_EQ(split("12ab!?"), (Pieces{"12", "ab", "!?"}));
  EXPECT_EQ(split("!!'s"), (Pieces{"!!'", "s"}));
  EXPECT_EQ(split(" 's"), (Pieces{" '", "s"}));
  EXPECT_EQ(split("a\xC2\xA0" "b"), (Pieces{"a", "\xC2\xA0", "b"}));  // NBSP is \s, alone before b
}

TEST(TokenizerSplit, InvalidUtf8BytesAreOtherCharacters) {
  EXPECT_EQ(split("a\xFF" "b"), (Pieces{"a", "\xFF", "b"}));
  EXPECT_EQ(split("\xFF\xFE!x"), (Pieces{"\xFF\xFE!", "x"}));
  EXPECT_EQ(split(" \xFF"), (Pieces{" \xFF"}));
  EXPECT_EQ(split("\xFF 's"), (Pieces{"\xFF", " '", "s"}));
  EXPECT_EQ(split("ab\xE2\x82"), (Pieces{"ab", "\xE2\x82"}));          // truncated 3-byte sequence
  EXPECT_EQ(split("ab\xC0\xAF" "c"), (Pieces{"ab", "\xC0\xAF", "c"}));  // overlong '/'
  EXPECT_EQ(split("x\xED\xA0\x80y"), (Pieces{"x", "\xED\xA0\x80", "y"}));  // UTF-16 surrogate
  EXPECT_EQ(split("x\xF4\x90\x80\x80y"), (Pieces{"x", "\xF4\x90\x80\x80", "y"}));  // > U+10FFFF
  EXPECT_EQ(split("\xC3\xA9t\xC3\xA9"), (Pieces{"\xC3\xA9t\xC3\xA9"}));  // valid: "été" is letters
}

TEST(TokenizerUnicode, ClassesFollowUnicodeProperties) {
  EXPECT_EQ(char_class('a'), CharClass::kLetter);
  EXPECT_EQ(char_class(0x00E9), CharClass::kLetter);
  EXPECT_EQ(char_class(0x4E2D), CharClass::kLetter);  // CJK: Lo
  EXPECT_EQ(char_class('7'), CharClass::kNumber);
  EXPECT_EQ(char_class(0x00BD), CharClass::kNumber);  // ½: No
  EXPECT_EQ(char_class(0x216B), CharClass::kNumber);  // Roman numeral: Nl
  EXPECT_EQ(char_class(0x0301), CharClass::kOther);   // combining mark: Mn
  // White_Space, as Rust's \s: U+0085, U+00A0, U+3000 are; U+001C..1F, U+200B, U+FEFF are not.
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                      0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    EXPECT_EQ(char_class(cp), CharClass::kSpace) << std::hex << cp;
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0x180Eu, 0x200Bu, 0xFEFFu})
    EXPECT_EQ(char_class(cp), CharClass::kOther) << std::hex << cp;
  EXPECT_EQ(char_class(0x1F600), CharClass::kOther);  // emoji: So
  EXPECT_EQ(char_class(0x20000), CharClass::kLetter);  // CJK extension B
  EXPECT_EQ(char_class(0x110000), CharClass::kOther);
}

TEST_F(TokenizerTest, RandomBytesRoundTrip) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  // Bytes drawn to hit UTF-8 structure: ASCII, continuation bytes, lead bytes, invalid bytes.
  const std::string alphabet = std::string("a Z0'\n\t s") + "\x80\xBF\xC0\xC2\xDF\xE0\xED\xEF\xF0\xF4\xF5\xFF";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s(rng() % 200, '\0');
    const bool any_byte = iter % 2;
    for (char& c : s) c = any_byte ? char(rng()) : alphabet[rng() % alphabet.size()];
    const auto ids = tok().encode(s);
    for (size_t i = 0; i < ids.size(); ++i)
      ASSERT_TRUE(ids[i] >= 0 && ids[i] < Tokenizer::kEot) << "seed " << seed;
    ASSERT_EQ(tok().decode(ids), s) << "seed " << seed << " iteration " << iter;
  }
}

// Pieces above kBpeSmallPiece take the heap path; it must merge in the scan's order. A random
// made-up vocabulary (byte b is id b; merge k makes id 256 + k from two earlier tokens) over a
// small alphabet makes ties and chains of merges common. (The nasty strings check long pieces
// against tiktoken itself.)
TEST(TokenizerMerge, HeapMatchesQuadraticScanOnLongPieces) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int vocab = 0; vocab < 5; ++vocab) {
    int32_t byte_ids[256];
    for (int b = 0; b < 256; ++b) byte_ids[b] = b;
    PairIndex pairs;
    const std::string alphabet = "abcd";
    std::vector<int32_t> pool = {'a', 'b', 'c', 'd'};
    for (int32_t id = 256; id < 256 + 300; ++id) {
      const int32_t l = pool[rng() % pool.size()], r = pool[rng() % pool.size()];
      if (pairs.find(l, r) >= 0) continue;
      pairs.insert(l, r, id);
      pool.push_back(id);
    }
    for (int iter = 0; iter < 20; ++iter) {
      std::string word(kBpeSmallPiece + 1 + rng() % 2000, 'x');
      for (char& c : word) c = alphabet[rng() % alphabet.size()];
      std::vector<int32_t> heap, scan;
      bpe_merge(word, byte_ids, pairs, heap);
      bpe_merge_scan(word, byte_ids, pairs, scan);
      ASSERT_EQ(heap, scan) << "seed " << seed << " vocab " << vocab << " word " << word;
    }
  }
}

TEST_F(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  const std::vector<int32_t> bad_high{15496, 995, 50257};
  try {
    tok().decode(bad_high);
    FAIL() << "no error for id 50257";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("50257"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("position 2"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> bad_low{-1};
  EXPECT_THROW(tok().decode(bad_low), Error);
  EXPECT_THROW(tok().token_bytes(50257), Error);
  EXPECT_EQ(tok().decode(std::vector<int32_t>{Tokenizer::kEot}), "<|endoftext|>");
}

TEST_F(TokenizerTest, EndOfTextInTextIsOrdinary) {
  const auto ids = tok().encode("a<|endoftext|>b");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), Tokenizer::kEot), 0);
  EXPECT_EQ(tok().decode(ids), "a<|endoftext|>b");
}

TEST_F(TokenizerTest, ThreadsGetTheSameIds) {
  const auto texts = read_jsonl_texts(kBundledEdu);
  const auto want = read_edu_vectors();
  ASSERT_EQ(texts.size(), want.size());
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t d = t; d < texts.size(); d += 2)  // overlapping halves: shared documents
        if (tok().encode(texts[d % texts.size()]) != want[d % texts.size()]) ++mismatches[t];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST_F(TokenizerTest, CopiesAndReloadsAgree) {
  const Tokenizer copy = tok();
  const Tokenizer again = Tokenizer::load(Tokenizer::default_dir());
  const std::string s = "Copies share the vocabulary; unusualwordzzqx and xqzzunusual.";
  EXPECT_EQ(copy.encode(s), tok().encode(s));
  EXPECT_EQ(again.encode(s), tok().encode(s));
  EXPECT_THROW(Tokenizer().encode("x"), Error);
}

// ---- loading errors ----

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dt_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(Tokenizer::default_dir() + "/encoder.json", dir_ / "encoder.json");
    fs::copy_file(Tokenizer::default_dir() + "/vocab.bpe", dir_ / "vocab.bpe");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << bytes;
  }
  // The error message of loading dir_, which must fail.
  std::string load_error() {
    try {
      Tokenizer::load(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "load succeeded";
    return "";
  }
  fs::path dir_;
};

TEST_F(TokenizerFiles, CopyLoads) { EXPECT_EQ(Tokenizer::load(dir_.string()).vocab_size(), 50257); }

TEST_F(TokenizerFiles, MissingEncoderJson) {
  fs::remove(dir_ / "encoder.json");
  const std::string e = load_error();
  EXPECT_NE(e.find((dir_ / "encoder.json").string()), std::string::npos) << e;
  EXPECT_NE(e.find("--tokenizer"), std::string::npos) << e;
}

TEST_F(TokenizerFiles, TruncatedEncoderJson) {
  const std::string full = read_file((dir_ / "encoder.json").string());
  write("encoder.json", full.substr(0, full.size() / 2));
  const std::string e = load_error();
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("encoder.json"), std::string::npos) << e;
}

TEST_F(TokenizerFiles, EncoderJsonWithAStringId) {
  std::string full = read_file((dir_ / "encoder.json").string());
  const size_t at = full.find("\"!\": 0");
  ASSERT_NE(at, std::string::npos);
  full.replace(at, 6, "\"!\": \"0\"");
  write("encoder.json", full);
  const std::string e = load_error();
  EXPECT_NE(e.find("not an integer"), std::string::npos) << e;
}

TEST_F(TokenizerFiles, EncoderJsonWithADuplicateIdOrAForeignCharacter) {
  const std::string full = read_file((dir_ / "encoder.json").string());
  std::string dup = full;
  dup.replace(dup.find("\"#\": 2"), 6, "\"#\": 1");
  write("encoder.json", dup);
  std::string e = load_error();
  EXPECT_NE(e.find("id 1 is used twice"), std::string::npos) << e;
  std::string foreign = full;
  foreign.replace(foreign.find("\"#\": 2"), 6, "\"\u4e2d\": 2");
  write("encoder.json", foreign);
  e = load_error();
  EXPECT_NE(e.find("byte alphabet"), std::string::npos) << e;
}

TEST_F(TokenizerFiles, EncoderJsonNotAnObject) {
  write("encoder.json", "[1, 2, 3]");
  EXPECT_NE(load_error().find("an array, not an object"), std::string::npos);
  write("encoder.json", "{}");
  EXPECT_NE(load_error().find("not an empty one"), std::string::npos);
  write("encoder.json", "{\"a\": {\"b\": 1}}");
  EXPECT_NE(load_error().find("the value of key \"a\" is an object"), std::string::npos);
}

TEST_F(TokenizerFiles, MissingVocabBpe) {
  fs::remove(dir_ / "vocab.bpe");
  EXPECT_NE(load_error().find("vocab.bpe"), std::string::npos);
}

TEST_F(TokenizerFiles, VocabBpeThatDoesNotMatch) {
  std::string bpe = read_file((dir_ / "vocab.bpe").string());
  const size_t line2 = bpe.find('\n') + 1;   // first merge "Ġ t" -> make it "Ġ a"
  ASSERT_EQ(bpe.substr(line2, 5), "\xC4\xA0 t\n");
  bpe[line2 + 3] = 'a';
  write("vocab.bpe", bpe);
  const std::string e = load_error();
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
}

TEST_F(TokenizerFiles, VocabBpeWithTooFewMerges) {
  std::string bpe = read_file((dir_ / "vocab.bpe").string());
  bpe.resize(bpe.rfind('\n', bpe.size() - 2) + 1);  // drop the last merge
  write("vocab.bpe", bpe);
  EXPECT_NE(load_error().find("49999 merges"), std::string::npos);
}

TEST(TokenizerDefaultDir, FollowsDeltatronAssets) {
  const char* old = std::getenv("DELTATRON_ASSETS");
  const std::string saved = old ? old : "";
  ::setenv("DELTATRON_ASSETS", "/somewhere/assets", 1);
  EXPECT_EQ(Tokenizer::default_dir(), "/somewhere/assets/gpt2");
  ::unsetenv("DELTATRON_ASSETS");
  EXPECT_EQ(Tokenizer::default_dir(), std::string(DELTATRON_SOURCE_DIR) + "/assets/gpt2");
  if (old) ::setenv("DELTATRON_ASSETS", saved.c_str(), 1);
}

}  // namespace
}  // namespace dt
