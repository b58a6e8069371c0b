// Upper bounds on train.grad_accum and run.threads, checked when the config is read.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "trainer/config.h"
#include "trainer/config_limits.h"

namespace dt {
namespace {

std::string error_of(const std::string& set) {
  try {
    parse_config("", {set}, "limits.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for --set " << set;
  return "";
}

TEST(ConfigLimits, GradAccumHasAnUpperBound) {
  const std::string msg = error_of("train.grad_accum=1000000000");
  EXPECT_NE(msg.find("train.grad_accum = 1000000000 must be <= 65536"), std::string::npos) << msg;
  EXPECT_NO_THROW(parse_config("", {"train.grad_accum=65536"}, "limits.yaml"));
}

TEST(ConfigLimits, ThreadsHaveAnUpperBound) {
  const std::string msg = error_of("run.threads=100000");
  EXPECT_NE(msg.find("run.threads = 100000 must be <= 4096"), std::string::npos) << msg;
  EXPECT_NO_THROW(parse_config("", {"run.threads=4096"}, "limits.yaml"));
}

}  // namespace
}  // namespace dt
