#include "trainer/run_dir.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "trainer/train.h"

namespace dt {

namespace fs = std::filesystem;

std::string run_dir_of(const Config& cfg, const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  return (fs::path(cfg.run.dir) / (cfg.run.name.empty() ? "run" : cfg.run.name)).string();
}

std::string find_resume_checkpoint(const std::string& run_dir) {
  const std::string dir = checkpoints_dir(run_dir);
  std::vector<CheckpointFile> files = list_checkpoints(dir);
  DT_CHECK(!files.empty(),
           "--resume: no checkpoint in '{}'{}; set train.checkpoint_every to save checkpoints, pass --resume FILE, "
           "or start without --resume",
           dir, fs::exists(run_dir) ? "" : fmt::format(" (the run directory '{}' does not exist)", run_dir));
  return files.back().path;
}

void make_run_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  DT_CHECK(!ec && fs::is_directory(dir), "cannot create the directory '{}': {}", dir.string(), ec.message());
}

std::vector<std::string> remove_partial_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::string> notes;
  for (const std::string& p : list_partial_checkpoints(ckpt_dir)) {
    std::error_code ec;
    if (fs::remove(p, ec)) notes.push_back(fmt::format("removed {}, a checkpoint save cut short by a crash", p));
  }
  return notes;
}

std::vector<std::string> prepare_fresh_run_dir(const std::string& dir, bool overwrite) {
  std::error_code ec;
  const std::string ckpt_dir = checkpoints_dir(dir);
  std::vector<CheckpointFile> old = list_checkpoints(ckpt_dir);
  DT_CHECK(overwrite || (!fs::exists(fs::path(dir) / "metrics.jsonl", ec) && old.empty()),
           "the run directory '{}' already holds {} from an earlier run; pass --resume to continue it, --overwrite "
           "to replace it, or choose another --run-dir (or run.name)",
           dir, old.empty() ? "metrics.jsonl" : "checkpoints");
  make_run_dir(dir);
  std::vector<std::string> notes = remove_partial_checkpoints(ckpt_dir);
  for (const CheckpointFile& f : old)
    if (fs::remove(f.path, ec)) notes.push_back(fmt::format("--overwrite: deleted {} of the earlier run", f.path));
  return notes;
}

double truncate_metrics(const fs::path& path, int64_t step, std::vector<std::string>& notes) {
  std::ifstream in(path);
  if (!in.good()) return 0;
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  // A last line without its newline would have the next record appended to it: rewrite then too.
  const bool torn = !text.str().empty() && text.str().back() != '\n';
  std::string kept, line;
  double time_s = 0;
  int dropped = 0, unreadable = 0;
  while (std::getline(text, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      ++unreadable;  // a line cut short by the crash
      continue;
    }
    if (j["step"].get<int64_t>() > step) {
      ++dropped;
      continue;
    }
    if (j.contains("time_s") && j["time_s"].is_number()) time_s = std::max(time_s, j["time_s"].get<double>());
    kept += line + "\n";
  }
  if (dropped == 0 && unreadable == 0 && !torn) return time_s;
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << kept;
    out.flush();
    DT_CHECK(out.good(), "cannot write '{}' (disk full?)", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  DT_CHECK(!ec, "cannot replace '{}': {}", path.string(), ec.message());
  if (dropped) notes.push_back(fmt::format("metrics.jsonl: dropped {} lines after step {} (they are redone)", dropped, step));
  if (unreadable) notes.push_back(fmt::format("metrics.jsonl: dropped {} unreadable lines (cut short by a crash)", unreadable));
  return time_s;
}

void write_resolved_config(const fs::path& run_dir, const Config& cfg) {
  const fs::path path = run_dir / "config.yaml";
  std::ofstream out(path, std::ios::trunc);
  out << "# The resolved config of this run; `deltatron train --config` with this file repeats it.\n" +
             config_to_yaml(cfg);
  DT_CHECK(out.good(), "cannot write '{}'", path.string());
}

ResumePoint find_resume_point(const Config& cfg, const std::string& run_dir, const std::string& resume_from) {
  ResumePoint r;
  r.path = resume_from.empty() ? find_resume_checkpoint(run_dir) : resume_from;
  try {
    r.state = checkpoint_read_state(r.path);  // verifies the whole file's SHA-256
  } catch (const Error& e) {
    DT_FAIL("--resume: {}{}", e.what(),
            resume_from.empty() ? "; if it is damaged, delete it to resume from the checkpoint before it" : "");
  }
  check_resume_config(checkpoint_config(r.path, r.state), cfg, r.path);
  DT_CHECK(r.state.step <= cfg.train.steps,
           "--resume: checkpoint {} is at step {}, past train.steps = {}; raise train.steps (--set train.steps=N) to "
           "train further",
           r.path, r.state.step, cfg.train.steps);
  // A newer checkpoint in the run directory belongs to a later point of the run being resumed (or
  // of another run); continuing from an older one would interleave two histories in one directory.
  std::vector<CheckpointFile> files = list_checkpoints(checkpoints_dir(run_dir));
  if (!files.empty() && files.back().step > r.state.step)
    DT_FAIL("--resume {}: the run directory '{}' already holds a later checkpoint, {}; resume from that one (plain "
            "--resume), delete the later checkpoints, or continue in another --run-dir",
            r.path, run_dir, files.back().path);
  return r;
}

}  // namespace dt
