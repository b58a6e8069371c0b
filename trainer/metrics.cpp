#include "trainer/metrics.h"

#include <cmath>
#include <ctime>

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
  log_ << iso8601_utc_now() << ' ' << line << '\n';
  log_.flush();
}

void RunLog::progress(const std::string& line, bool keep) {
  if (keep) {
    log_ << iso8601_utc_now() << ' ' << line << '\n';
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

std::string format_progress(const Progress& p) {
  return fmt::format("step {}/{} | loss {:.4f} | lr {:.1e} | grad {:.3g} | {} tok/s{} | mem {:.2f} GiB | {} | ETA {}",
                     p.step, p.steps, p.loss, p.lr, p.grad_norm, format_rate(p.tokens_per_s),
                     p.mfu >= 0 ? fmt::format(" | MFU {:.1f}%", 100 * p.mfu) : "", p.peak_mem_gib,
                     format_duration(p.elapsed_s), format_duration(p.eta_s));
}

std::string iso8601_utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace dt
