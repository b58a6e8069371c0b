#include "trainer/checkpointing.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "core/device.h"
#include "core/error.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

// "step_00001234.h5" -> 1234; -1 for anything else (leftover temporaries included).
int64_t step_of_file_name(const std::string& name) {
  constexpr std::string_view prefix = "step_", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size() - suffix.size();
  int64_t step = -1;
  auto [p, ec] = std::from_chars(first, last, step);
  return ec == std::errc() && p == last && step >= 0 ? step : -1;
}

// Host views of the tensors to save or load: device tensors (GPU training) are staged through host
// buffers, since the HDF5 writer and reader take host memory.
class HostStage {
 public:
  Tensor stage(const Tensor& t) {
    if (t.device == Device::kCPU) return t;
    DT_CHECK(t.dtype == DType::kF32 && t.is_contiguous(), "checkpoint: cannot stage {}", t.str());
    bufs_.emplace_back(static_cast<size_t>(t.numel()));
    Tensor h(bufs_.back().data(), t.dtype, Device::kCPU, t.shape);
    pairs_.push_back({t, h});
    return h;
  }
  void download() const {
    for (const auto& [d, h] : pairs_) device_copy(h.data, Device::kCPU, d.data, d.device, d.bytes());
  }
  void upload() const {
    for (const auto& [d, h] : pairs_) device_copy(d.data, d.device, h.data, Device::kCPU, h.bytes());
  }

 private:
  std::vector<std::vector<float>> bufs_;
  std::vector<std::pair<Tensor, Tensor>> pairs_;
};

// The fp32 masters, under their names.
std::vector<NamedTensor> param_tensors(const ParamStore& params, HostStage& stage) {
  std::vector<NamedTensor> out;
  for (int s = 0; s < params.size(); ++s) out.push_back({params.infos()[s].name, stage.stage(params.master(s))});
  return out;
}

// AdamW's moment `which` ('m' or 'v') of every parameter, under the parameter's name.
std::vector<NamedTensor> moment_tensors(const ParamStore& params, const AdamW& opt, char which, HostStage& stage) {
  std::vector<NamedTensor> out;
  for (int s = 0; s < params.size(); ++s)
    out.push_back({params.infos()[s].name, stage.stage(which == 'm' ? opt.m(s) : opt.v(s))});
  return out;
}

}  // namespace

std::string checkpoints_dir(const std::string& run_dir) { return (fs::path(run_dir) / "checkpoints").string(); }

std::string checkpoint_file_name(int64_t step) { return fmt::format("step_{:08d}.h5", step); }

std::vector<CheckpointFile> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    int64_t step = step_of_file_name(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const CheckpointFile& a, const CheckpointFile& b) { return a.step < b.step; });
  return out;
}

std::vector<std::string> list_partial_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

void save_train_checkpoint(const std::string& path, const Config& cfg, const ParamStore& params, const AdamW& opt,
                           CheckpointState state) {
  state.config_yaml = config_to_yaml(cfg);
  state.tp = cfg.parallel.tp;
  state.dp = 1;  // no data parallelism yet
  state.optimizer_steps = opt.steps_done();
  HostStage stage;
  std::vector<CheckpointGroup> groups = {{"params", param_tensors(params, stage)},
                                         {"optimizer/m", moment_tensors(params, opt, 'm', stage)},
                                         {"optimizer/v", moment_tensors(params, opt, 'v', stage)}};
  stage.download();
  checkpoint_save(path, state, groups);
}

CheckpointState load_train_checkpoint(const std::string& path, ParamStore& params, AdamW* opt) {
  CheckpointState state = checkpoint_read_state(path);
  HostStage stage;
  checkpoint_load_group(path, {"params", param_tensors(params, stage)});
  if (opt) {
    checkpoint_load_group(path, {"optimizer/m", moment_tensors(params, *opt, 'm', stage)});
    checkpoint_load_group(path, {"optimizer/v", moment_tensors(params, *opt, 'v', stage)});
    opt->set_steps_done(state.optimizer_steps);
  }
  stage.upload();
  params.sync_compute();
  return state;
}

Config checkpoint_config(const std::string& path, const CheckpointState& state) {
  try {
    return parse_config(state.config_yaml, {}, "the config stored in checkpoint " + path);
  } catch (const Error& e) {
    DT_FAIL("checkpoint {}: its stored config is invalid: {} (the checkpoint was written by another version of "
            "deltatron, or edited)", path, e.what());
  }
}

bool resume_key_may_differ(const std::string& key) {
  static const char* const kFree[] = {"train.steps", "train.eval_every", "train.eval_batches",
                                      "train.checkpoint_every", "train.keep_last", "train.max_skips_in_a_row"};
  if (key.rfind("run.", 0) == 0 || key.rfind("parallel.", 0) == 0) return true;
  return std::find(std::begin(kFree), std::end(kFree), key) != std::end(kFree);
}

void check_resume_config(const Config& saved, const Config& now, const std::string& checkpoint_path) {
  auto a = config_values(saved), b = config_values(now);
  DT_ASSERT(a.size() == b.size());
  std::vector<std::string> diffs;
  for (size_t i = 0; i < a.size(); ++i)
    if (!resume_key_may_differ(a[i].first) && a[i].second != b[i].second)
      diffs.push_back(fmt::format("{} is {} in the checkpoint but {} now", a[i].first, a[i].second, b[i].second));
  if (diffs.empty()) return;
  std::string list;
  for (const std::string& d : diffs) list += (diffs.size() > 1 ? "\n  - " : " ") + d;
  DT_FAIL("cannot resume from {}: the config differs from the one it was trained with:{}{}The model, data and train "
          "sections must match, except train.steps, eval_every, eval_batches, checkpoint_every, keep_last and "
          "max_skips_in_a_row; put the checkpoint's values back (its config: `deltatron info {}`), or start a new run "
          "without --resume",
          checkpoint_path, list, diffs.size() > 1 ? "\n" : ". ", checkpoint_path);
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep_last, int64_t keep_step) {
  std::vector<CheckpointFile> files = list_checkpoints(dir);
  std::vector<std::string> deleted;
  int kept = 0;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {  // newest first
    if (it->step == keep_step || kept < keep_last) {
      ++kept;
      continue;
    }
    std::error_code ec;
    if (fs::remove(it->path, ec)) deleted.push_back(fs::path(it->path).filename().string());
  }
  return deleted;
}

}  // namespace dt
