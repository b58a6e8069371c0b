#include "trainer/yaml_keys.h"

#include <yaml-cpp/yaml.h>

#include <map>

#include "core/error.h"

namespace dt {

namespace {

void walk(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) walk(node[i], path + "[" + std::to_string(i) + "]", source);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;  // key -> 1-based line of its first occurrence
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node& key = it->first;
    const std::string child = key.IsScalar() ? (path.empty() ? key.Scalar() : path + "." + key.Scalar()) : path;
    if (key.IsScalar()) {
      const int line = key.Mark().line + 1;
      auto [at, inserted] = first_line.emplace(key.Scalar(), line);
      DT_CHECK(inserted,
               "{}:{}: duplicate key {} (first at line {}); YAML keeps only one of them: merge the two into one "
               "entry and delete the other",
               source, line, child, at->second);
    }
    walk(it->second, child, source);
  }
}

}  // namespace

void check_no_duplicate_keys(const YAML::Node& root, const std::string& source) { walk(root, "", source); }

}  // namespace dt
