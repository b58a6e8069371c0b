#include "trainer/metrics.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace dt {

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : path_(path), out_(path, append ? std::ios::app : std::ios::trunc) {
  DT_CHECK(out_.good(), "cannot write the metrics file '{}'; check that its folder is writable", path);
}

void MetricsWriter::write(const nlohmann::ordered_json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  DT_CHECK(out_.good(), "writing '{}' failed (disk full?)", path_);
}

RunLog::RunLog(const std::string& log_path, std::FILE* console, bool console_is_tty, bool append)
    : log_(log_path, append ? std::ios::app : std::ios::trunc), console_(console), tty_(console_is_tty) {
  DT_CHECK(log_.good(), "cannot write the log file '{}'; check that its folder is writable", log_path);
}

RunLog::~RunLog() { clear_pending(); }

void RunLog::clear_pending() {
  if (pending_ && console_) std::fputs("\r\033[K", console_);
  pending_ = false;
}

void RunLog::print(const std::string& line) {
  clear_pending();
  if (console_) {
    std::fprintf(console_, "%s\n", line.c_str());
    std::fflush(console_);
  }
  log_ << line << '\n';
  log_.flush();
}

void RunLog::progress(const std::string& line, bool keep) {
  if (keep) {
    log_ << line << '\n';
    log_.flush();
  }
  if (!console_) return;
  if (tty_) {
    std::fprintf(console_, "\r%s\033[K%s", line.c_str(), keep ? "\n" : "");
    pending_ = !keep;
  } else if (keep) {
    std::fprintf(console_, "%s\n", line.c_str());
  }
  std::fflush(console_);
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second)) return "-";
  if (per_second >= 1e9) return fmt::format("{:.1f}G", per_second / 1e9);
  if (per_second >= 1e6) return fmt::format("{:.1f}M", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f}K", per_second / 1e3);
  return fmt::format("{:.0f}", per_second);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  long s = std::lround(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_progress(int step, int steps, double loss, double lr, double tokens_per_s, double eta_s) {
  return fmt::format("step {}/{} | loss {:.4f} | lr {:.1e} | {} tok/s | ETA {}", step, steps, loss, lr,
                     format_rate(tokens_per_s), format_duration(eta_s));
}

}  // namespace dt
