// What a run reports: metrics.jsonl (one JSON object per line, flushed at once, so a crashed
// or running job can be plotted), log.txt (what was printed, each line after its ISO 8601 UTC
// time), and the live progress line:
//   step 12/300 | loss 7.1234 | lr 6.0e-04 | grad 0.53 | 12.3K tok/s | MFU 41.2% | mem 3.10 GiB | 1m05s | ETA 2m31s
// (MFU only on the GPU; the time is the run's so far, the ETA counts evaluations and saves).
// On a terminal the line is rewritten in place ('\r') every step and kept every log_every
// steps; otherwise (a file, CI) one line is printed every log_every steps.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dt {

// Appends JSON lines to a file. Doubles are written in the shortest form that reads back
// to the same bits (nlohmann's round-trip formatting), so runs can be compared exactly.
class MetricsWriter {
 public:
  // Truncates the file, or appends to it (a resumed run continues its metrics).
  explicit MetricsWriter(const std::string& path, bool append = false);
  void write(const nlohmann::ordered_json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// Prints to a console stream (stderr; may be null for silence) and copies to log.txt.
class RunLog {
 public:
  RunLog(const std::string& log_path, std::FILE* console, bool console_is_tty, bool append = false);
  ~RunLog();
  void print(const std::string& line);  // a whole line: console and log.txt
  // A progress line: on a terminal redrawn in place; `keep` leaves it on screen and writes it
  // to log.txt (and is the only case printed when the console is not a terminal).
  void progress(const std::string& line, bool keep);

 private:
  void clear_pending();
  std::ofstream log_;
  std::FILE* console_;
  bool tty_;
  bool pending_ = false;  // a redrawn progress line sits on the terminal without a newline
};

// "12.3K", "1.2M", "950"
std::string format_rate(double per_second);
// "45s", "2m31s", "1h02m"
std::string format_duration(double seconds);
// What the progress line shows.
struct Progress {
  int step = 0, steps = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0;
  double mfu = -1;           // a fraction; negative: not shown (on the CPU)
  double peak_mem_gib = 0;
  double elapsed_s = 0;      // the run so far (with the time before a resume)
  double eta_s = 0;          // the steps left at the wall time per step so far, evaluations and saves included
};
std::string format_progress(const Progress& p);
// "2026-12-03T19:42:54Z": a log.txt line's time, UTC.
std::string iso8601_utc_now();

}  // namespace dt
