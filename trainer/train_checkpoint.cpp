#include "trainer/train_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>
#include <memory>

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

// A tensor of every parameter (a moment), under the parameter's name.
std::vector<NamedTensor> slot_tensors(const ParamStore& params, const std::function<Tensor(int)>& of,
                                      HostStage& stage) {
  std::vector<NamedTensor> out;
  for (int s = 0; s < params.size(); ++s) out.push_back({params.infos()[s].name, stage.stage(of(s))});
  return out;
}

// Under TP: whole host copies of every slot's tensor (`part(s)`: this rank's part, f32), the split
// ones all-gathered over `tp` and put together (every TP rank calls it, in the same order).
std::vector<NamedTensor> gather_whole(const ParamStore& params, const std::function<Tensor(int)>& part,
                                      Communicator& tp, std::vector<std::vector<float>>& store) {
  std::vector<NamedTensor> out;
  const int n_tp = tp.size();
  for (int s = 0; s < params.size(); ++s) {
    const ParamInfo& info = params.infos()[s];
    const Tensor t = part(s);
    DT_CHECK(t.dtype == DType::kF32 && t.is_contiguous(), "checkpoint: cannot gather {} {}", info.name, t.str());
    std::vector<float>& whole = store.emplace_back(static_cast<size_t>(info.full_shape.numel()));
    if (info.split == TpSplit::kReplicated) {
      device_copy(whole.data(), Device::kCPU, t.data, t.device, t.bytes());
    } else {
      const int64_t n = t.numel();
      void* buf = device_alloc(t.bytes() * n_tp, t.device);
      tp.all_gather(Tensor(buf, DType::kF32, t.device, {n * n_tp}), t);
      std::vector<float> parts(static_cast<size_t>(n * n_tp));
      device_copy(parts.data(), Device::kCPU, buf, t.device, t.bytes() * n_tp);
      device_free(buf, t.device);
      for (int r = 0; r < n_tp; ++r)
        tp_copy_part(info, {r, n_tp}, whole.data(), parts.data() + r * n, sizeof(float), /*to_part=*/false);
    }
    out.push_back({info.name, Tensor(whole.data(), DType::kF32, Device::kCPU, info.full_shape)});
  }
  return out;
}

// Under TP: loads group `group` of the file whole and copies this rank's part of each tensor into part(s).
void load_parts(const std::string& path, const std::string& group, const ParamStore& params,
                const std::function<Tensor(int)>& part) {
  std::vector<std::vector<float>> store;
  std::vector<NamedTensor> whole;
  for (int s = 0; s < params.size(); ++s) {
    const ParamInfo& info = params.infos()[s];
    whole.push_back({info.name, Tensor(store.emplace_back(static_cast<size_t>(info.full_shape.numel())).data(),
                                       DType::kF32, Device::kCPU, info.full_shape)});
  }
  checkpoint_load_group(path, {group, whole});
  for (int s = 0; s < params.size(); ++s) {
    const Tensor t = part(s);
    DT_CHECK(t.dtype == DType::kF32 && t.is_contiguous(), "checkpoint: cannot load into {}", t.str());
    std::vector<float> mine(static_cast<size_t>(t.numel()));
    tp_copy_part(params.infos()[s], params.tp(), store[s].data(), mine.data(), sizeof(float), /*to_part=*/true);
    device_copy(t.data, t.device, mine.data(), Device::kCPU, t.bytes());
  }
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
                           CheckpointState state, Communicator* tp, int dp) {
  state.config_yaml = config_to_yaml(cfg);
  state.tp = params.tp().size;
  state.dp = dp;
  state.optimizer_steps = opt.steps_done();
  // ZeRO-1: the moments' shards gathered whole over DP first (every DP rank takes part), then DP
  // rank 0 goes on as with a plain optimizer.
  std::unique_ptr<WholeMoments> whole;
  const bool moments = cfg.train.save_optimizer;  // false: a weights-only file
  if (opt.sharded() && !moments && opt.zero1()->comm().rank() != 0) return;
  if (opt.sharded() && moments) {
    whole = std::make_unique<WholeMoments>(params);
    opt.gather_moments(*whole);
    if (opt.zero1()->comm().rank() != 0) return;
  }
  const std::function<Tensor(int)> m_of = [&](int s) { return whole ? whole->m(s) : opt.m(s); };
  const std::function<Tensor(int)> v_of = [&](int s) { return whole ? whole->v(s) : opt.v(s); };
  if (params.tp().size > 1) {
    DT_CHECK(tp && tp->size() == params.tp().size && tp->rank() == params.tp().rank,
             "checkpoint: the parameters are split over {} TP ranks; pass this rank's TP communicator",
             params.tp().size);
    std::vector<std::vector<float>> store;
    std::vector<CheckpointGroup> groups = {
        {"params", gather_whole(params, [&](int s) { return params.master(s); }, *tp, store)}};
    if (moments) {
      groups.push_back({"optimizer/m", gather_whole(params, m_of, *tp, store)});
      groups.push_back({"optimizer/v", gather_whole(params, v_of, *tp, store)});
    }
    if (tp->rank() == 0) checkpoint_save(path, state, groups);
    return;
  }
  HostStage stage;
  std::vector<CheckpointGroup> groups = {{"params", param_tensors(params, stage)}};
  if (moments) {
    groups.push_back({"optimizer/m", slot_tensors(params, m_of, stage)});
    groups.push_back({"optimizer/v", slot_tensors(params, v_of, stage)});
  }
  stage.download();
  checkpoint_save(path, state, groups);
}

CheckpointState load_train_checkpoint(const std::string& path, ParamStore& params, AdamW* opt) {
  CheckpointState state = checkpoint_read_state(path);
  DT_CHECK(!opt || checkpoint_has_group(path, "optimizer/m"),
           "checkpoint {} holds the weights only (written with train.save_optimizer: false), without AdamW's moments "
           "that resuming needs; evaluate it with `deltatron eval --checkpoint {}`, or resume from a checkpoint "
           "written with train.save_optimizer: true",
           path, path);
  // ZeRO-1: the whole moments are read first; each rank then keeps its shard (scatter_moments).
  std::unique_ptr<WholeMoments> whole;
  if (opt && opt->sharded()) whole = std::make_unique<WholeMoments>(params);
  const std::function<Tensor(int)> m_of = [&](int s) { return whole ? whole->m(s) : opt->m(s); };
  const std::function<Tensor(int)> v_of = [&](int s) { return whole ? whole->v(s) : opt->v(s); };
  if (params.tp().size > 1) {  // the file holds whole tensors: take this rank's part of each
    load_parts(path, "params", params, [&](int s) { return params.master(s); });
    if (opt) {
      load_parts(path, "optimizer/m", params, m_of);
      load_parts(path, "optimizer/v", params, v_of);
    }
  } else {
    HostStage stage;
    checkpoint_load_group(path, {"params", param_tensors(params, stage)});
    if (opt) {
      checkpoint_load_group(path, {"optimizer/m", slot_tensors(params, m_of, stage)});
      checkpoint_load_group(path, {"optimizer/v", slot_tensors(params, v_of, stage)});
    }
    stage.upload();
  }
  if (opt) {
    if (whole) opt->scatter_moments(*whole);
    opt->set_steps_done(state.optimizer_steps);
  }
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
