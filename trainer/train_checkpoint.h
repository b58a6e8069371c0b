// What the training loop keeps in its checkpoints, and where (the file format is trainer/checkpoint_format.h):
//
//   <run dir>/checkpoints/step_00001234.h5
//     /params/<hf name>        fp32 master weights
//     /optimizer/m/<hf name>   AdamW first moment
//     /optimizer/v/<hf name>   AdamW second moment
//     attributes               the resolved config (YAML), step, tokens seen, the train loader's cursor,
//                              RNG seed/offset, TP/DP layout, AdamW's step count, skipped updates
//
// Together with the config these are the whole state of a run: resuming from them continues the
// exact sequence of losses of an uninterrupted run (tests/trainer/test_resume.cpp). The loop draws
// no random numbers after the init (no dropout), so the RNG offset is 0 and the data order is a
// function of (train.seed, epoch) held by the loader cursor.
//
// A save is atomic (checkpoint_format.h), so every step_*.h5 present is complete; a crash during a save
// leaves at most a `step_*.h5.tmp.<pid>` file, which is never taken for a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/params.h"
#include "parallel/communicator.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"

namespace dt {

// <run dir>/checkpoints
std::string checkpoints_dir(const std::string& run_dir);
// "step_00001234.h5"
std::string checkpoint_file_name(int64_t step);

struct CheckpointFile {
  int64_t step = 0;
  std::string path;
};

// The complete checkpoints (step_<digits>.h5) in `dir`, oldest first; none when `dir` does not exist.
std::vector<CheckpointFile> list_checkpoints(const std::string& dir);
// Leftovers of interrupted saves (*.tmp.*) in `dir`.
std::vector<std::string> list_partial_checkpoints(const std::string& dir);

// Saves params, AdamW's moments and `state` (its config_yaml and layout are filled in here).
// Tensors are stored whole: when the parameters are split over TP (params.tp().size > 1) every rank
// of the TP group calls it with its TP communicator `tp`; the parts are all-gathered and TP rank 0
// writes the file. `dp`: the data-parallel size, recorded (DP replicas are identical: only one of
// them, DP rank 0, calls this) -- except under ZeRO-1 (opt.sharded()), where every DP rank calls it:
// the moments' shards are all-gathered over DP (two temporary arenas the size of the gradients),
// then DP rank 0 goes on alone.
void save_train_checkpoint(const std::string& path, const Config& cfg, const ParamStore& params, const AdamW& opt,
                           CheckpointState state, Communicator* tp = nullptr, int dp = 1);

// Loads the parameters (and, with `opt`, AdamW's moments and step count) of the checkpoint at `path`
// into a model of the same shape; every tensor is checked (name, shape, SHA-256). Returns its state.
// Under TP each rank reads the whole tensors and keeps its part, so a checkpoint saved under any
// TP/DP layout loads under any other; under ZeRO-1 each rank keeps its shard of the moments, so a
// checkpoint of a ZeRO-1 run loads into a plain one and back.
CheckpointState load_train_checkpoint(const std::string& path, ParamStore& params, AdamW* opt);

// The config stored in a checkpoint, parsed and validated (errors name the checkpoint).
Config checkpoint_config(const std::string& path, const CheckpointState& state);

// Keys whose value may change when a run is resumed: everything under run and parallel (a
// checkpoint holds whole tensors, so it loads under any layout), and the train keys that do not
// change what a step computes (train.steps, so that a run can be extended, and the evaluation,
// checkpoint and skip settings). Every other key of model, data and train must match.
bool resume_key_may_differ(const std::string& key);

// Throws an error listing every key that must match but differs, with its value in the
// checkpoint and now.
void check_resume_config(const Config& saved, const Config& now, const std::string& checkpoint_path);

// Deletes all but the `keep_last` newest checkpoints in `dir`; never the one at `keep_step` (the one
// just saved). Returns the deleted files' names.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep_last, int64_t keep_step);

}  // namespace dt
