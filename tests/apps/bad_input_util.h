// Helpers for the bad-input tests: a scratch directory per test, running the built `deltatron`
// in it, and the one check every bad input must pass (exit code 1, `deltatron: error: ` and the
// words that say what is wrong and where).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dt::bad_input {

namespace fs = std::filesystem;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::move(ss).str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// One shell word: 'it''s' -> 'it'\''s'.
inline std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliResult {
  int code = -1;  // the exit status; -1 when the process died of a signal
  std::string out, err;
};

// A fresh directory per test (removed afterwards) in which `deltatron` runs.
class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("dt_bad_input_") + info->test_suite_name() + "_" + info->name() +
                                        "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir_, ec); it != fs::recursive_directory_iterator(); ++it)
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);  // chmod'ed cases
    fs::remove_all(dir_, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string qpath(const std::string& name) const { return quote(path(name)); }

  // `deltatron ARGS` (shell words, quoted by the caller) in the scratch directory; `env` is a
  // prefix such as "DELTATRON_ASSETS=/x".
  CliResult run(const std::string& args, const std::string& stdin_path = "/dev/null", const std::string& env = "") const {
    const std::string out = path(".stdout"), err = path(".stderr");
    const std::string cmd = "cd " + quote(dir_.string()) + " && " + env + (env.empty() ? "" : " ") +
                            quote(DELTATRON_BINARY) + " " + args + " <" + quote(stdin_path) + " >" + quote(out) +
                            " 2>" + quote(err);
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  // The rule for every bad input: exit code 1 (not a crash, not 0), stderr starting with
  // `deltatron: error: `, and every piece (what is wrong, where) in the message.
  static void expect_error(const CliResult& r, const std::vector<std::string>& pieces, const std::string& what) {
    EXPECT_EQ(r.code, 1) << what << "\nstderr: " << r.err << "\nstdout: " << r.out.substr(0, 500);
    EXPECT_EQ(r.err.rfind("deltatron: error: ", 0), 0u) << what << "\nstderr: " << r.err;
    for (const std::string& p : pieces)
      EXPECT_NE(r.err.find(p), std::string::npos) << what << ": expected '" << p << "' in:\n" << r.err;
  }

  // Runs `deltatron ARGS` and applies expect_error.
  void expect_error(const std::string& args, const std::vector<std::string>& pieces,
                    const std::string& stdin_path = "/dev/null", const std::string& env = "") const {
    expect_error(run(args, stdin_path, env), pieces, "deltatron " + args);
  }

  fs::path dir_;
};

}  // namespace dt::bad_input
