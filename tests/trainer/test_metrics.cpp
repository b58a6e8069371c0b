// The progress line, the JSON-lines writer and the log.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "trainer/metrics.h"

namespace dt {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dt_metrics_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Metrics, ProgressLine) {
  Progress p{.step = 12, .steps = 300, .loss = 7.12341, .lr = 6e-4, .grad_norm = 0.5312, .tokens_per_s = 12345.0,
             .mfu = 0.41234, .peak_mem_gib = 3.1, .elapsed_s = 65, .eta_s = 151.0};
  EXPECT_EQ(format_progress(p),
            "step 12/300 | loss 7.1234 | lr 6.0e-04 | grad 0.531 | 12.3K tok/s | MFU 41.2% | mem 3.10 GiB | 1m05s | ETA 2m31s");
  p.mfu = -1;  // on the CPU
  EXPECT_EQ(format_progress(p),
            "step 12/300 | loss 7.1234 | lr 6.0e-04 | grad 0.531 | 12.3K tok/s | mem 3.10 GiB | 1m05s | ETA 2m31s");
  EXPECT_EQ(format_rate(950), "950");
  EXPECT_EQ(format_rate(1.25e6), "1.2M");
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(59), "59s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(-1), "-");
}

TEST(Metrics, JsonLinesKeepEveryBit) {
  std::string path = temp_path("m.jsonl");
  {
    MetricsWriter w(path);
    w.write({{"step", 1}, {"loss", 0.1 + 0.2}});
    w.write({{"step", 2}, {"val_loss", 1.0 / 3.0}});
  }
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  nlohmann::json a = nlohmann::json::parse(line);
  EXPECT_EQ(line.rfind("{\"step\":1,", 0), 0u) << line;  // keys in the written order
  EXPECT_EQ(a["loss"].get<double>(), 0.1 + 0.2);
  std::getline(in, line);
  EXPECT_EQ(nlohmann::json::parse(line)["val_loss"].get<double>(), 1.0 / 3.0);
  EXPECT_FALSE(std::getline(in, line));
  std::remove(path.c_str());
}

// log.txt without the ISO 8601 UTC time every line starts with; a line without one fails the test.
std::string without_times(const std::string& log) {
  static const std::regex time(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z )");
  std::istringstream in(log);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    EXPECT_TRUE(std::regex_search(line, time)) << "no time at the start of: " << line;
    out += std::regex_replace(line, time, "") + "\n";
  }
  return out;
}

TEST(Metrics, LogLinesStartWithTheUtcTime) {
  const std::string now = iso8601_utc_now();
  EXPECT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)"))) << now;
  std::string log = temp_path("log3.txt");
  {
    RunLog rl(log, nullptr, false);
    rl.print("model: 4 layers");
  }
  const std::string text = read_all(log);
  EXPECT_EQ(text.substr(0, 4), now.substr(0, 4)) << text;
  EXPECT_EQ(without_times(text), "model: 4 layers\n");
  std::remove(log.c_str());
}

TEST(Metrics, LogWithoutTerminalPrintsKeptLinesOnly) {
  std::string log = temp_path("log.txt"), console = temp_path("console.txt");
  std::FILE* f = std::fopen(console.c_str(), "w");
  ASSERT_TRUE(f);
  {
    RunLog rl(log, f, /*console_is_tty=*/false);
    rl.print("model: 4 layers");
    rl.progress("step 1/3", false);
    rl.progress("step 2/3", true);
  }
  std::fclose(f);
  EXPECT_EQ(read_all(console), "model: 4 layers\nstep 2/3\n");
  EXPECT_EQ(without_times(read_all(log)), "model: 4 layers\nstep 2/3\n");
  std::remove(log.c_str());
  std::remove(console.c_str());
}

TEST(Metrics, LogOnATerminalRedrawsInPlace) {
  std::string log = temp_path("log2.txt"), console = temp_path("console2.txt");
  std::FILE* f = std::fopen(console.c_str(), "w");
  ASSERT_TRUE(f);
  {
    RunLog rl(log, f, /*console_is_tty=*/true);
    rl.progress("step 1/3", false);
    rl.print("eval");
    rl.progress("step 2/3", true);
  }
  std::fclose(f);
  EXPECT_EQ(read_all(console), "\rstep 1/3\033[K\r\033[Keval\n\rstep 2/3\033[K\n");
  EXPECT_EQ(without_times(read_all(log)), "eval\nstep 2/3\n");
  std::remove(log.c_str());
  std::remove(console.c_str());
}

TEST(Metrics, UnwritableFolderIsAClearError) {
  try {
    MetricsWriter w("/nonexistent_dir_dt/metrics.jsonl");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write the metrics file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dt
