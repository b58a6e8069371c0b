// docs/config.md must document every config key, with its true default, and nothing else:
// the rows `| `key` | `default` | meaning |` are read back and checked against the code.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "core/error.h"
#include "trainer/config.h"

namespace dt {
namespace {

std::map<std::string, std::string> documented_defaults() {
  std::string path = std::string(DELTATRON_SOURCE_DIR) + "/docs/config.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::map<std::string, std::string> rows;
  std::regex row(R"(^\| `([a-z_0-9.]+)` \| `([^`]*)` \|)");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      EXPECT_FALSE(rows.count(m[1])) << "documented twice: " << m[1];
      rows[m[1]] = m[2];
    }
  }
  return rows;
}

TEST(ConfigDoc, EveryKeyIsDocumentedAndNothingElse) {
  std::map<std::string, std::string> rows = documented_defaults();
  for (const std::string& key : config_keys()) EXPECT_TRUE(rows.count(key)) << "docs/config.md lacks " << key;
  std::vector<std::string> keys = config_keys();
  for (const auto& [key, value] : rows)
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << "docs/config.md documents unknown key " << key;
}

TEST(ConfigDoc, DocumentedDefaultsAreTheDefaults) {
  const Config defaults = default_config();
  for (const auto& [key, value] : documented_defaults()) {
    try {
      Config c = parse_config("", {key + "=" + value});
      EXPECT_TRUE(config_equal(c, defaults)) << "docs/config.md gives " << key << " the default `" << value
                                             << "`, the code another";
    } catch (const Error& e) {
      ADD_FAILURE() << "docs/config.md: default of " << key << " does not parse: " << e.what();
    }
  }
}

}  // namespace
}  // namespace dt
