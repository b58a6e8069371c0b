// The checkpoint file format (docs/config.md, "Checkpoints and --resume"; docs/inputs.md,
// "Checkpoints"): one HDF5 file per save, whose 512-byte user block holds a magic line and the
// SHA-256 of the rest. What the training loop stores in it is trainer/train_checkpoint.h.
//
//   /params/<hf name>          fp32 master weights, whole (unsharded)
//   /optimizer/m/<hf name>     AdamW first moment
//   /optimizer/v/<hf name>     AdamW second moment
//   root attributes            format_version, config (YAML), step, tokens_seen, loader cursor,
//                              RNG seed and offset, TP/DP layout, optimizer steps and skipped updates
//   each dataset's attribute   sha256 of its bytes (little-endian fp32)
//
// Saving is atomic: the file is written under a temporary name in the same directory,
// flushed and fsync'ed, then renamed over the final name, and the directory is fsync'ed.
// A crash at any point leaves either the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dt {

inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointState {
  std::string config_yaml;  // the resolved config
  int64_t step = 0;         // optimizer steps done
  int64_t tokens_seen = 0;
  uint64_t loader_epoch = 0;
  uint64_t loader_position = 0;
  uint64_t rng_seed = 0;
  uint64_t rng_offset = 0;
  int64_t tp = 1;
  int64_t dp = 1;
  // The training loop's counters. A step whose loss or gradient is not finite counts as a step but
  // makes no AdamW update, so AdamW's own count can trail `step`. Files written before these
  // attributes existed read as optimizer_steps = step and no skips.
  int64_t optimizer_steps = 0;
  int64_t skipped_steps = 0;   // skipped updates so far
  int64_t skips_in_a_row = 0;  // consecutive skipped updates ending at `step`
};

// A host tensor (f32, contiguous) to save, or to load into, under a name.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One group of tensors, e.g. {"params", ...} or {"optimizer/m", ...}.
struct CheckpointGroup {
  std::string path;
  std::vector<NamedTensor> tensors;
};

void checkpoint_save(const std::string& path, const CheckpointState& state,
                     const std::vector<CheckpointGroup>& groups);

// Reads and validates the root attributes (format version first).
CheckpointState checkpoint_read_state(const std::string& path);

// Loads every tensor of `group` into the given host tensors. Each must be present with the
// same shape, and its SHA-256 must match; tensors in the file that are not asked for are an
// error too (the checkpoint belongs to another model). Errors name the file and the tensor.
void checkpoint_load_group(const std::string& path, const CheckpointGroup& group);

// Whether the file holds the group (e.g. "optimizer/m": not in a weights-only file).
bool checkpoint_has_group(const std::string& path, const std::string& group);

// Names and shapes of the datasets under `group` (for `deltatron info` and tests).
std::vector<std::pair<std::string, Shape>> checkpoint_list(const std::string& path, const std::string& group);

// Full validation (attributes, every dataset's checksum) and a printable summary.
std::string checkpoint_summary(const std::string& path);

}  // namespace dt
