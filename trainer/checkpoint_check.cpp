#include "trainer/checkpoint_check.h"

#include <map>

#include "core/error.h"
#include "layers/model.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"

namespace dt {

namespace {

// The groups of the file: params always, the moments when the file has them.
std::vector<std::string> groups_of(const std::string& path) {
  std::vector<std::string> groups = {"params"};
  for (const char* g : {"optimizer/m", "optimizer/v"}) {
    try {
      checkpoint_list(path, g);
      groups.push_back(g);
    } catch (const Error&) {  // a weights-only file
    }
  }
  return groups;
}

}  // namespace

void checkpoint_check_structure(const std::string& path) {
  const CheckpointState state = checkpoint_read_state(path);
  Config cfg;
  try {
    cfg = parse_config(state.config_yaml, {}, path + " (its stored config)");
  } catch (const Error& e) {
    DT_FAIL("checkpoint {}: its stored config is not valid: {}", path, e.what());
  }
  std::vector<ParamInfo> infos;
  try {
    infos = Model::param_infos(cfg.model);
  } catch (const Error& e) {
    DT_FAIL("checkpoint {}: its stored config cannot make a model: {}", path, e.what());
  }
  for (const std::string& group : groups_of(path)) {
    std::map<std::string, Shape> in_file;
    for (auto& [name, shape] : checkpoint_list(path, group)) in_file.emplace(name, shape);
    for (const ParamInfo& info : infos) {
      const Shape want = info.full_shape.ndim > 0 ? info.full_shape : info.shape;
      const std::string full = group + "/" + info.name;
      auto it = in_file.find(info.name);
      DT_CHECK(it != in_file.end(),
               "checkpoint {}: tensor {} is missing; the checkpoint was written for a different model config", path,
               full);
      DT_CHECK(it->second == want,
               "checkpoint {}: tensor {} has shape {} but the model expects {}; the checkpoint was written for a "
               "different model config",
               path, full, it->second.str(), want.str());
      in_file.erase(it);
    }
    DT_CHECK(in_file.empty(),
             "checkpoint {}: tensor {}/{} is not part of this model; the checkpoint was written for a different "
             "model config",
             path, group, in_file.empty() ? "" : in_file.begin()->first);
  }
}

std::vector<CheckpointTensorInfo> checkpoint_tensors(const std::string& path) {
  std::vector<CheckpointTensorInfo> out;
  for (const std::string& group : groups_of(path))
    for (auto& [name, shape] : checkpoint_list(path, group)) out.push_back({group + "/" + name, shape, "float32"});
  return out;
}

}  // namespace dt
