// Documents from input files, streamed one at a time (the inputs may be far larger than memory):
//   *.jsonl / *.json: JSON lines, one object per line with a string field "text" (blank lines are skipped);
//   "-": JSON lines from standard input (a pipe, as scripts/prepare_fineweb_edu.py feeds it);
//   anything else: plain text, the whole file is one document.
// A bad line is a dt::Error naming the file and line number.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace dt {

enum class InputFormat { kText, kJsonLines };

// The format of an input path, from its extension ("-" is JSON lines from stdin).
InputFormat input_format_of(const std::string& path);

// The "text" field of one JSON line; throws naming `path` and `line_no` when the line is not a
// JSON object with a string "text".
std::string jsonl_text(const std::string& line, const std::string& path, int64_t line_no);

class DocumentReader {
 public:
  // Checks that every input can be opened before any is read (a typo fails at once, not hours in).
  explicit DocumentReader(std::vector<std::string> inputs);

  // The next non-empty document's text; false after the last one. Empty documents are skipped
  // (an empty text would give a lone EOT) and counted.
  bool next(std::string& text);

  uint64_t bytes_read() const { return bytes_read_; }
  int64_t empty_skipped() const { return empty_skipped_; }

 private:
  bool open_next_input();

  std::vector<std::string> inputs_;
  size_t next_input_ = 0;
  std::string path_;  // the input being read
  InputFormat format_ = InputFormat::kText;
  std::unique_ptr<std::ifstream> file_;
  std::istream* in_ = nullptr;  // file_ or std::cin
  int64_t line_no_ = 0;
  std::string line_;
  uint64_t bytes_read_ = 0;
  int64_t empty_skipped_ = 0;
};

}  // namespace dt
