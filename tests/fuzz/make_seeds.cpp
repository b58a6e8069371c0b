// Writes seed inputs for the fuzzers: a valid shard, checkpoint and safetensors file.
#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"
#include "io/safetensors.h"
#include "trainer/checkpoint_format.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::string dir = argv[1];
  std::vector<uint16_t> tokens = {50256, 464, 2068, 7586, 21831, 50256, 15496, 995};
  dt::write_shard(dir + "/shard/seed_val_000000.bin", tokens);
  std::vector<float> w(12), b(5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  dt::CheckpointState s;
  s.config_yaml = "model:\n  d_model: 4\n";
  s.step = 3;
  dt::checkpoint_save(dir + "/checkpoint/seed.h5", s,
                      {{"params", {{"w", dt::Tensor(w.data(), dt::DType::kF32, dt::Device::kCPU, {3, 4})},
                                   {"b", dt::Tensor(b.data(), dt::DType::kF32, dt::Device::kCPU, {5})}}},
                       {"optimizer/m", {{"w", dt::Tensor(w.data(), dt::DType::kF32, dt::Device::kCPU, {3, 4})}}}});
  std::vector<uint16_t> half = {0x3f80, 0xbf80, 0x4000};
  dt::write_safetensors(dir + "/safetensors/seed.safetensors",
                        {{"w", dt::DType::kF32, {3, 4}, w.data()}, {"h", dt::DType::kBF16, {3}, half.data()}},
                        {{"format", "pt"}});
  return 0;
}
