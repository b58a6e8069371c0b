#include "data/jsonl.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace dt {

namespace fs = std::filesystem;

InputFormat input_format_of(const std::string& path) {
  if (path == "-") return InputFormat::kJsonLines;
  const std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".json" ? InputFormat::kJsonLines : InputFormat::kText;
}

std::string jsonl_text(const std::string& line, const std::string& path, int64_t line_no) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    DT_FAIL("input {}, line {}: not valid JSON ({}); each line must be one object like {{\"text\": \"...\"}}", path,
            line_no, e.what());
  }
  DT_CHECK(j.is_object(), "input {}, line {}: a JSON {} where an object like {{\"text\": \"...\"}} was expected", path,
           line_no, j.type_name());
  auto it = j.find("text");
  DT_CHECK(it != j.end(), "input {}, line {}: the object has no \"text\" field; each line must be like "
           "{{\"text\": \"...\"}}", path, line_no);
  DT_CHECK(it->is_string(), "input {}, line {}: the \"text\" field is a {}, not a string", path, line_no,
           it->type_name());
  return it->get<std::string>();
}

DocumentReader::DocumentReader(std::vector<std::string> inputs) : inputs_(std::move(inputs)) {
  DT_CHECK(!inputs_.empty(), "no input files; pass --input FILE... (text, .jsonl or '-' for JSON lines on stdin)");
  int stdin_uses = 0;
  for (const std::string& p : inputs_) {
    if (p == "-") {
      ++stdin_uses;
      continue;
    }
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    DT_CHECK(fs::exists(st), "input {}: no such file", p);
    DT_CHECK(!fs::is_directory(st), "input {}: is a directory; pass the files in it (e.g. '{}/*.jsonl')", p, p);
    std::ifstream probe(p, std::ios::binary);
    DT_CHECK(probe.good(), "input {}: cannot open: {}", p, std::strerror(errno));
  }
  DT_CHECK(stdin_uses <= 1, "input '-' (standard input) is given {} times; it can be read once", stdin_uses);
}

bool DocumentReader::open_next_input() {
  file_.reset();
  in_ = nullptr;
  if (next_input_ == inputs_.size()) return false;
  path_ = inputs_[next_input_++];
  format_ = input_format_of(path_);
  // /dev/stdin through a filebuf reads a pipe with large buffered reads (std::cin is synced with stdio).
  file_ = std::make_unique<std::ifstream>(path_ == "-" ? "/dev/stdin" : path_, std::ios::binary);
  DT_CHECK(file_->good(), "input {}: cannot open: {}", path_, std::strerror(errno));
  if (path_ == "-") path_ = "<stdin>";
  in_ = file_.get();
  line_no_ = 0;
  return true;
}

bool DocumentReader::next(std::string& text) {
  for (;;) {
    if (in_ == nullptr && !open_next_input()) return false;
    if (format_ == InputFormat::kText) {
      std::ostringstream ss;
      ss << in_->rdbuf();
      DT_CHECK(!in_->bad(), "input {}: read failed", path_);
      text = std::move(ss).str();
      bytes_read_ += text.size();
      in_ = nullptr;  // one document per text file
    } else {
      if (!std::getline(*in_, line_)) {
        DT_CHECK(!in_->bad(), "input {}: read failed after line {}", path_, line_no_);
        in_ = nullptr;
        continue;
      }
      ++line_no_;
      bytes_read_ += line_.size() + 1;
      if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
      text = jsonl_text(line_, path_, line_no_);
    }
    if (!text.empty()) return true;
    ++empty_skipped_;
  }
}

}  // namespace dt
