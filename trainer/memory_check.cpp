#include "trainer/memory_check.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "layers/model.h"

namespace dt {

namespace {

std::string gib(uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

uint64_t host_available() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

MemoryEstimate estimate_memory(const ModelConfig& m, int batch, int seq_len, int tp, int dp, bool zero1,
                               bool training) {
  MemoryEstimate e;
  for (const ParamInfo& p : Model::param_infos(m)) e.parameters += p.shape.numel();
  e.parameters /= std::max(tp, 1);
  const double p = static_cast<double>(e.parameters);
  const double moments = 8.0 * p / (zero1 ? std::max(dp, 1) : 1);
  e.state_bytes = static_cast<uint64_t>(training ? 8.0 * p + moments : 4.0 * p);
  const double tokens = static_cast<double>(batch) * seq_len;
  const double per_layer = 16.0 * m.d_model + 4.0 * m.d_ff;
  const double logits = tokens * m.vocab_size / std::max(tp, 1) * (training ? 2 : 1);
  e.activation_bytes = static_cast<uint64_t>(4.0 * (tokens * m.n_layers() * per_layer + logits));
  return e;
}

uint64_t available_memory(Device device) {
  return device == Device::kCUDA ? static_cast<uint64_t>(device_memory_free()) : host_available();
}

void check_memory_fits(const ModelConfig& m, int batch, int seq_len, int tp, int dp, bool zero1, bool training,
                       Device device, uint64_t available) {
  if (available == 0) return;  // unknown: the allocator decides
  const MemoryEstimate e = estimate_memory(m, batch, seq_len, tp, dp, zero1, training);
  // Training can change its config; evaluation reads a checkpoint's model and batch shape as they are.
  const std::string fix =
      training ? "lower model.d_model, model.d_ff, model.layers or model.vocab_size, or train.batch_size / "
                 "train.seq_len, or raise parallel.tp (or parallel.zero1 with data parallelism)"
               : "evaluation uses the checkpoint's model and its train.batch_size x train.seq_len; evaluate where "
                 "more memory is free (another GPU, or --device cpu)";
  DT_CHECK(e.total() <= available,
           "the model does not fit: it needs at least {} ({} parameters{}: {}{}; activations for train.batch_size x "
           "train.seq_len = {} x {}: about {}) but the {} has {} available; {}",
           gib(e.total()), e.parameters, tp > 1 ? fmt::format(" on each of parallel.tp = {} ranks", tp) : "",
           gib(e.state_bytes), training ? " with gradients and AdamW moments" : "", batch, seq_len,
           gib(e.activation_bytes), device == Device::kCUDA ? "GPU" : "host", gib(available), fix);
}

void check_training_memory(const Config& cfg, Device device, int tp, int dp) {
  check_memory_fits(cfg.model, cfg.train.batch_size, cfg.train.seq_len, tp, dp, cfg.parallel.zero1, true, device,
                    available_memory(device));
}

}  // namespace dt
