// `deltatron tokenize` / `detokenize`, run as a user would: the built binary on temp files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/tokenizer.h"

namespace dt {
namespace {

namespace fs = std::filesystem;

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dt_tokcli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return std::move(ss).str();
  }
  // Runs `deltatron ARGS < stdin_file > out 2> err`; returns the exit status.
  int run(const std::string& args, const std::string& stdin_file = "/dev/null") const {
    const std::string cmd = std::string("'") + DELTATRON_BINARY + "' " + args + " < '" + stdin_file +
                            "' > '" + path("out") + "' 2> '" + path("err") + "'";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_;
};

const std::string kText =
    "Hello world! It's 2024 \xE2\x80\x94 caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\n"
    "  tabs\tand\r\nlines<|endoftext|>\n\n";

TEST_F(TokenizeCli, TokenizeFilePrintsIdsOnOneLine) {
  const Tokenizer tok = Tokenizer::load(Tokenizer::default_dir());
  write("in.txt", kText);
  ASSERT_EQ(run("tokenize --input '" + path("in.txt") + "'"), 0) << read("err");
  std::string want;
  for (const int32_t id : tok.encode(kText)) {
    if (!want.empty()) want += ' ';
    want += std::to_string(id);
  }
  EXPECT_EQ(read("out"), want + "\n");
}

TEST_F(TokenizeCli, TokenizeStdinThenDetokenizeRoundTrips) {
  std::string bytes = kText + std::string("\xFF\xFE invalid \xC0 utf-8", 18);
  write("in.txt", bytes);
  ASSERT_EQ(run("tokenize", path("in.txt")), 0) << read("err");
  const std::string ids = read("out");
  EXPECT_EQ(ids.find("50256"), std::string::npos);  // <|endoftext|> in text stays text
  write("ids.txt", ids);
  ASSERT_EQ(run("detokenize --input '" + path("ids.txt") + "'"), 0) << read("err");
  EXPECT_EQ(read("out"), bytes);
  ASSERT_EQ(run("detokenize", path("ids.txt")), 0) << read("err");
  EXPECT_EQ(read("out"), bytes);
}

TEST_F(TokenizeCli, DetokenizeAcceptsAnyWhitespace) {
  write("ids.txt", "\n 15496\t\t995 \r\n50256\n");
  ASSERT_EQ(run("detokenize --input '" + path("ids.txt") + "'"), 0) << read("err");
  EXPECT_EQ(read("out"), "Hello world<|endoftext|>");
}

TEST_F(TokenizeCli, DetokenizeRejectsBadIdsWithTheirPosition) {
  write("big.txt", "15496 995 50257");
  EXPECT_EQ(run("detokenize --input '" + path("big.txt") + "'"), 1);
  std::string err = read("err");
  EXPECT_EQ(err.rfind("deltatron: error: ", 0), 0u) << err;
  EXPECT_NE(err.find("'50257' (token 2, byte offset 10"), std::string::npos) << err;

  write("word.txt", "15496 abc");
  EXPECT_EQ(run("detokenize --input '" + path("word.txt") + "'"), 1);
  err = read("err");
  EXPECT_NE(err.find("'abc' (token 1, byte offset 6"), std::string::npos) << err;

  write("neg.txt", "-1");
  EXPECT_EQ(run("detokenize --input '" + path("neg.txt") + "'"), 1);
  EXPECT_TRUE(read("out").empty());
}

TEST_F(TokenizeCli, MissingInputOrTokenizerIsAnError) {
  EXPECT_EQ(run("tokenize --input '" + path("nope.txt") + "'"), 1);
  EXPECT_NE(read("err").find("nope.txt"), std::string::npos) << read("err");
  write("in.txt", "x");
  EXPECT_EQ(run("tokenize --input '" + path("in.txt") + "' --tokenizer '" + path("no_dir") + "'"), 1);
  EXPECT_NE(read("err").find("encoder.json"), std::string::npos) << read("err");
}

}  // namespace
}  // namespace dt
