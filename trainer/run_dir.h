// The run directory of `deltatron train` (trainer/train.h): getting it ready for a fresh run or a
// resumed one, and the checkpoint that --resume continues from. run_dir_of and
// find_resume_checkpoint, declared in trainer/train.h, are defined in run_dir.cpp too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trainer/config.h"
#include "trainer/train_checkpoint.h"

namespace dt {

// Creates `dir` (the run directory, or its checkpoints/) and its parents; an error naming it otherwise.
void make_run_dir(const std::filesystem::path& dir);

// Removes leftovers of saves cut short by a crash; returns what to report.
std::vector<std::string> remove_partial_checkpoints(const std::string& ckpt_dir);

// A fresh run refuses a directory that holds an earlier run (metrics or checkpoints) unless
// `overwrite`; then the earlier checkpoints are deleted, since keep_last and --resume would
// otherwise mix them with this run's. Returns what to report.
std::vector<std::string> prepare_fresh_run_dir(const std::string& dir, bool overwrite);

// Keeps the lines of metrics.jsonl up to `step` (a resumed run redoes the steps after it) through a
// temporary file and a rename, so that a crash here loses nothing. Returns the largest time_s kept.
double truncate_metrics(const std::filesystem::path& path, int64_t step, std::vector<std::string>& notes);

// <run dir>/config.yaml: the resolved config, which `deltatron train --config` repeats.
void write_resolved_config(const std::filesystem::path& run_dir, const Config& cfg);

// What --resume continues from, checked against the current config before anything is written.
struct ResumePoint {
  std::string path;
  CheckpointState state;
};

// `resume_from`, or the newest checkpoint of `run_dir` when empty: read (the whole file's SHA-256
// verified), its config checked against `cfg`, and refused when the run directory holds a later one.
ResumePoint find_resume_point(const Config& cfg, const std::string& run_dir, const std::string& resume_from);

}  // namespace dt
