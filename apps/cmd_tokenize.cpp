// `deltatron tokenize` and `deltatron detokenize`: text <-> GPT-2 token ids (data/tokenizer.h).
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/commands.h"
#include "core/error.h"
#include "data/tokenizer.h"

namespace dt {

namespace {

struct TokenizeArgs {
  std::string input = "-";
  std::string tokenizer_dir = Tokenizer::default_dir();
};

std::string input_name(const std::string& input) { return input == "-" ? "standard input" : input; }

// The whole input as bytes ("-": standard input).
std::string read_input(const std::string& input) {
  std::ostringstream ss;
  if (input == "-") {
    ss << std::cin.rdbuf();
    return std::move(ss).str();
  }
  // A directory opens (and reads as empty) on Linux: without this check it would be an empty input.
  std::error_code ec;
  DT_CHECK(!std::filesystem::is_directory(input, ec),
           "--input '{}' is a directory; pass a file, or '-' for standard input", input);
  std::ifstream in(input, std::ios::binary);
  DT_CHECK(in, "cannot open --input '{}' ({})", input, std::strerror(errno));
  ss << in.rdbuf();
  DT_CHECK(!in.bad(), "error reading --input '{}'", input);
  return std::move(ss).str();
}

void write_stdout(std::string_view bytes) {
  DT_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size(),
           "cannot write to standard output ({})", std::strerror(errno));
}

void run_tokenize(const TokenizeArgs& a) {
  const Tokenizer tok = Tokenizer::load(a.tokenizer_dir);
  const std::vector<int32_t> ids = tok.encode(read_input(a.input));
  std::string out;
  out.reserve(ids.size() * 6 + 1);
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out.append(buf, std::to_chars(buf, buf + sizeof buf, ids[i]).ptr);
  }
  out += '\n';
  write_stdout(out);
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

void run_detokenize(const TokenizeArgs& a) {
  const Tokenizer tok = Tokenizer::load(a.tokenizer_dir);
  const std::string text = read_input(a.input);
  const int32_t vocab = tok.vocab_size();
  std::vector<int32_t> ids;
  for (size_t at = 0; at < text.size();) {
    if (is_space(text[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < text.size() && !is_space(text[end])) ++end;
    const std::string_view word(text.data() + at, end - at);
    int64_t id = -1;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    DT_CHECK(ec == std::errc() && ptr == word.data() + word.size() && id >= 0 && id < vocab,
             "detokenize: '{}' (token {}, byte offset {} of {}) is not a token id; ids are "
             "integers in [0, {}) separated by whitespace",
             word.substr(0, 40), ids.size(), at, input_name(a.input), vocab);
    ids.push_back(static_cast<int32_t>(id));
    at = end;
  }
  write_stdout(tok.decode(ids));
}

CLI::App* add_common(CLI::App* cmd, TokenizeArgs& a) {
  cmd->add_option("--input", a.input, "Input file ('-': standard input)")->capture_default_str();
  cmd->add_option("--tokenizer", a.tokenizer_dir,
                  "Directory with GPT-2's encoder.json and vocab.bpe")->capture_default_str();
  return cmd;
}

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto tok_args = std::make_shared<TokenizeArgs>();
  CLI::App* tok = add_common(
      app.add_subcommand("tokenize", "Print the GPT-2 token ids of the whole input, space-separated, "
                                     "on one line"),
      *tok_args);
  tok->footer("Exactly tiktoken's gpt2 encode_ordinary: <|endoftext|> in the text is plain text.\n"
              "Example: echo -n 'Hello world' | deltatron tokenize   # 15496 995");
  tok->callback([tok_args] { run_tokenize(*tok_args); });

  auto detok_args = std::make_shared<TokenizeArgs>();
  CLI::App* detok = add_common(
      app.add_subcommand("detokenize", "Read whitespace-separated GPT-2 token ids and write their bytes"),
      *detok_args);
  detok->footer("Example: echo 15496 995 | deltatron detokenize   # Hello world");
  detok->callback([detok_args] { run_detokenize(*detok_args); });
}

}  // namespace dt
