// The structural checks that loading a checkpoint makes, without a model: the stored config must
// parse and make a model, and /params (and the optimizer's moments, when present) must hold exactly
// that model's tensors, with its shapes. `deltatron info` runs them so that it says `valid: yes`
// only for files that `eval` and `train --resume` accept.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dt {

// Throws dt::Error with the message checkpoint_load_group would give for the first tensor that is
// missing, of another shape, or not part of the stored config's model; or for a stored config that
// is not valid. Reads no tensor data.
void checkpoint_check_structure(const std::string& path);

// Every tensor of the file: group/name, shape, dtype ("float32"), in group order.
struct CheckpointTensorInfo {
  std::string name;
  Shape shape;
  std::string dtype;
};
std::vector<CheckpointTensorInfo> checkpoint_tensors(const std::string& path);

}  // namespace dt
