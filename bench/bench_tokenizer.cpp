// Tokenizer throughput: encodes a corpus single-threaded and with N threads, prints MB/s and
// tokens/s, optionally writes JSON. bench/bench_tokenizer.py runs tiktoken on the same text.
//   bench_tokenizer [--input FILE] [--threads N] [--repeat R] [--json OUT] [--tokenizer DIR]
// FILE.jsonl: the "text" field of each line is a document; any other file is cut into documents
// at the first newline after every 64 KiB (bench_tokenizer.py cuts the same way).
// Every timed pass runs on fresh threads, so the per-thread piece caches start cold.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"

namespace {

struct Options {
  std::string input = DELTATRON_SOURCE_DIR "/assets/fineweb-edu/fineweb_edu.jsonl";
  std::string tokenizer = dt::Tokenizer::default_dir();
  std::string json;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int repeat = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      DT_CHECK(i + 1 < argc, "bench_tokenizer: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--input") o.input = value();
    else if (a == "--threads") o.threads = std::max(1, std::atoi(value().c_str()));
    else if (a == "--repeat") o.repeat = std::max(1, std::atoi(value().c_str()));
    else if (a == "--json") o.json = value();
    else if (a == "--tokenizer") o.tokenizer = value();
    else
      DT_FAIL("bench_tokenizer: unknown argument '{}'; usage: bench_tokenizer [--input FILE] "
              "[--threads N] [--repeat R] [--json OUT] [--tokenizer DIR]", a);
  }
  return o;
}

std::vector<std::string> read_documents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in, "bench_tokenizer: cannot open --input '{}'", path);
  std::vector<std::string> docs;
  if (path.ends_with(".jsonl")) {
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    return docs;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string all = std::move(ss).str();
  for (size_t at = 0; at < all.size();) {
    size_t end = std::min(all.size(), at + (64 << 10));
    end = std::min(all.size(), all.find('\n', end) == std::string::npos ? all.size() : all.find('\n', end) + 1);
    docs.push_back(all.substr(at, end - at));
    at = end;
  }
  return docs;
}

struct Run {
  double seconds = 1e30;      // wall clock, best of the repeats
  double cpu_seconds = 1e30;  // CPU time of all the threads together, best of the repeats
  size_t tokens = 0;
};

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Encodes all documents with `threads` fresh threads pulling documents off a shared counter.
Run time_encode(const dt::Tokenizer& tok, const std::vector<std::string>& docs, int threads, int repeat) {
  Run best;
  for (int r = 0; r < repeat; ++r) {
    std::atomic<size_t> next{0}, tokens{0};
    std::atomic<int64_t> cpu_ns{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        const double cpu0 = thread_cpu_seconds();
        std::vector<int32_t> ids;
        size_t n = 0;
        for (size_t d; (d = next.fetch_add(1)) < docs.size();) {
          ids.clear();
          tok.encode_append(docs[d], ids);
          n += ids.size();
        }
        tokens += n;
        cpu_ns += static_cast<int64_t>((thread_cpu_seconds() - cpu0) * 1e9);
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best.seconds = std::min(best.seconds, s);
    best.cpu_seconds = std::min(best.cpu_seconds, cpu_ns * 1e-9);
    best.tokens = tokens;
  }
  return best;
}

nlohmann::json report(const Run& r, size_t bytes) {
  return {{"seconds", r.seconds}, {"tokens", r.tokens}, {"mb_per_s", bytes / r.seconds / 1e6},
          {"tokens_per_s", r.tokens / r.seconds}, {"cpu_seconds", r.cpu_seconds},
          {"mb_per_cpu_s", bytes / r.cpu_seconds / 1e6}};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const auto t_load = std::chrono::steady_clock::now();
    const dt::Tokenizer tok = dt::Tokenizer::load(o.tokenizer);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    const std::vector<std::string> docs = read_documents(o.input);
    size_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();

    const Run single = time_encode(tok, docs, 1, o.repeat);
    const Run multi = time_encode(tok, docs, o.threads, o.repeat);
    DT_CHECK(single.tokens == multi.tokens, "bench_tokenizer: thread counts disagree on tokens");

    std::printf("deltatron tokenizer: %s\n  %zu documents, %.2f MB, %zu tokens; load %.0f ms; best of %d\n",
                o.input.c_str(), docs.size(), bytes / 1e6, single.tokens, load_s * 1e3, o.repeat);
    // MB per CPU-second is what one core does, even on a machine shared with other work.
    std::printf("  %-8s %10s %10s %14s %14s\n", "threads", "seconds", "MB/s", "tokens/s", "MB/CPU-s");
    for (const auto& [n, r] : {std::pair{1, single}, std::pair{o.threads, multi}})
      std::printf("  %-8d %10.3f %10.1f %14.0f %14.1f\n", n, r.seconds, bytes / r.seconds / 1e6,
                  r.tokens / r.seconds, bytes / r.cpu_seconds / 1e6);
    if (!o.json.empty()) {
      const nlohmann::json j = {{"tool", "deltatron"},       {"input", o.input},
                                {"documents", docs.size()},  {"bytes", bytes},
                                {"load_seconds", load_s},    {"repeat", o.repeat},
                                {"single", report(single, bytes)}, {"threads", o.threads},
                                {"multi", report(multi, bytes)}};
      std::ofstream(o.json) << j.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
