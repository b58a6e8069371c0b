// Duplicate keys in a config are errors naming the key and both lines (yaml-cpp alone would keep
// the first and drop the second silently).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "trainer/config.h"

namespace dt {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, {}, "dup.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(ConfigDuplicates, SecondSectionIsAnError) {
  const std::string msg = error_of("model:\n  d_model: 64\ntrain:\n  lr: 0.001\nmodel:\n  d_model: 128\n");
  EXPECT_NE(msg.find("dup.yaml:5: duplicate key model (first at line 1)"), std::string::npos) << msg;
}

TEST(ConfigDuplicates, RepeatedLeafNamesItsPath) {
  const std::string msg = error_of("train:\n  lr: 0.001\n  steps: 10\n  lr: 0.002\n");
  EXPECT_NE(msg.find("dup.yaml:4: duplicate key train.lr (first at line 2)"), std::string::npos) << msg;
}

TEST(ConfigDuplicates, FlowMappingsToo) {
  const std::string msg = error_of("train: {lr: 0.001, lr: 0.002}\n");
  EXPECT_NE(msg.find("duplicate key train.lr"), std::string::npos) << msg;
}

TEST(ConfigDuplicates, DistinctKeysStillLoad) {
  EXPECT_NO_THROW(parse_config("model:\n  d_model: 64\ntrain:\n  lr: 0.001\n", {}, "ok.yaml"));
}

}  // namespace
}  // namespace dt
