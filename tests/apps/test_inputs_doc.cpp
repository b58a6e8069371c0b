// docs/inputs.md must stay true: every flag that apps/cmd_*.cpp declares, and every config key of
// docs/config.md, has a row in it, and every test a row cites exists. A new flag without a
// documented bad-input test fails here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace dt {
namespace {

namespace fs = std::filesystem;

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(DELTATRON_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(in.good()) << "cannot read " << rel;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The table rows of docs/inputs.md.
std::vector<std::string> table_rows() {
  std::istringstream in(read_source("docs/inputs.md"));
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| ", 0) == 0 && line.find("| ---") != 0) rows.push_back(line);
  return rows;
}

bool some_row_has(const std::vector<std::string>& rows, const std::string& piece) {
  for (const std::string& r : rows)
    if (r.find(piece) != std::string::npos) return true;
  return false;
}

// The long names of add_option("--name", ...) / add_flag("-n,--name", ...) in apps/cmd_*.cpp.
std::set<std::string> declared_flags() {
  std::set<std::string> flags;
  const std::regex call(R"(add_(?:option|flag)\s*\(\s*"([^"]*)\")");
  for (const auto& entry : fs::directory_iterator(std::string(DELTATRON_SOURCE_DIR) + "/apps")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("cmd_", 0) != 0 || entry.path().extension() != ".cpp") continue;
    const std::string text = read_source("apps/" + name);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
      std::stringstream names((*it)[1].str());
      for (std::string n; std::getline(names, n, ',');)
        if (n.rfind("--", 0) == 0) flags.insert(n);
    }
  }
  return flags;
}

TEST(InputsDoc, EveryFlagHasARow) {
  const std::set<std::string> flags = declared_flags();
  ASSERT_GT(flags.size(), 15u) << "the regex no longer finds the flags in apps/cmd_*.cpp";
  const std::vector<std::string> rows = table_rows();
  for (const std::string& f : flags)
    EXPECT_TRUE(some_row_has(rows, "`" + f)) << "docs/inputs.md has no row for " << f
                                             << "; add one with its bad-input test (tests/apps/test_bad_input.cpp)";
}

TEST(InputsDoc, EveryConfigKeyHasARow) {
  const std::string config_md = read_source("docs/config.md");
  const std::regex key_row(R"(\n\| `([a-z_0-9.]+)` \| `[^`]*` \|)");
  const std::vector<std::string> rows = table_rows();
  int keys = 0;
  for (auto it = std::sregex_iterator(config_md.begin(), config_md.end(), key_row); it != std::sregex_iterator();
       ++it, ++keys)
    EXPECT_TRUE(some_row_has(rows, "| `" + (*it)[1].str() + "` |")) << "docs/inputs.md has no row for " << (*it)[1];
  EXPECT_GT(keys, 40);
}

// Every `file.cpp: Suite.Name` a row cites names a test that exists in tests/<file>.
TEST(InputsDoc, EveryCitedTestExists) {
  const std::regex cite(R"(`([a-z_]+/[a-z_0-9]+\.cpp): ([A-Za-z0-9]+)\.([A-Za-z0-9]+)`)");
  int cited = 0;
  std::set<std::string> rows_without_test;
  for (const std::string& row : table_rows()) {
    bool any = false;
    for (auto it = std::sregex_iterator(row.begin(), row.end(), cite); it != std::sregex_iterator(); ++it, ++cited) {
      any = true;
      const std::string file = (*it)[1], suite = (*it)[2], name = (*it)[3];
      const std::string text = read_source("tests/" + file);
      const std::regex test_decl("TEST(_F|_P)?\\(\\s*" + suite + ",\\s*" + name + "\\s*\\)");
      EXPECT_TRUE(std::regex_search(text, test_decl)) << "docs/inputs.md cites " << suite << "." << name << " in tests/"
                                                      << file << ", which has no such test";
    }
    if (!any && row.find("| input |") == std::string::npos) rows_without_test.insert(row);
  }
  EXPECT_GT(cited, 50);
  for (const std::string& row : rows_without_test) ADD_FAILURE() << "docs/inputs.md row cites no test: " << row;
}

// The docs describe what the code does now: a statement of work still to come ("not built yet",
// "refused until X exists") goes stale the day X lands, so none is allowed in the reference docs.
TEST(InputsDoc, NoFutureWorkInTheReferenceDocs) {
  const std::regex future(R"(not built yet|not yet (built|supported|implemented)|until [^|.]{0,60} exists)",
                          std::regex::icase);
  for (const char* doc : {"docs/inputs.md", "docs/config.md"}) {
    std::istringstream in(read_source(doc));
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      EXPECT_FALSE(std::regex_search(line, future))
          << doc << ":" << n << " speaks of work to come; say what the code does now: " << line;
    }
  }
}

// Paths that tests show working must not be called refused. Each entry: a pattern for a refusal
// claim, and the test that runs the path (which must exist, so the entry cannot outlive it).
TEST(InputsDoc, WorkingPathsAreNotCalledRefused) {
  struct Works {
    const char* claim;
    const char* test_file;
    const char* test_decl;
  };
  const Works works[] = {
      {R"((> ?1|tp > 1)`?,? (is |are )?(refused|not built|not supported))", "mpi/test_mpi_tp.cpp",
       "TEST(MpiTrainer, EveryLayoutRepeatsTheOneProcessCurve)"},
      {R"(fewer KV heads than `?tp`?[^|]{0,60}(refused|not built|not supported))", "layers/test_tp_kv.cpp",
       "TEST(TpKvReplication, OneKvHeadOnEveryRank)"},
  };
  for (const Works& w : works) {
    EXPECT_NE(read_source(std::string("tests/") + w.test_file).find(w.test_decl), std::string::npos)
        << "tests/" << w.test_file << " no longer has " << w.test_decl << "; update this list";
    const std::regex claim(w.claim, std::regex::icase);
    for (const char* doc : {"docs/inputs.md", "docs/config.md", "README.md"}) {
      std::istringstream in(read_source(doc));
      int n = 0;
      for (std::string line; std::getline(in, line);) {
        ++n;
        EXPECT_FALSE(std::regex_search(line, claim))
            << doc << ":" << n << " calls refused a path that " << w.test_decl << " runs: " << line;
      }
    }
  }
}

}  // namespace
}  // namespace dt
