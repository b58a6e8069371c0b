// The device a run uses and the Context that goes with it.
//
//   Runtime rt(resolve_device(cfg.run.device));
//   Model model(cfg.model, B, T, DType::kF32, rt.device());
//   model.forward(rt.ctx(), ...);
//
// On the GPU the Runtime owns the stream, the cuBLASLt and cuDNN handles and their workspaces
// (kernels/cuda_context.h); on the CPU it is a plain Context.
#pragma once

#include <memory>
#include <string>

#include "core/context.h"

namespace dt {

// run.device / --device: "cuda" needs a GPU and a CUDA build (a clear error otherwise), "cpu" is
// the CPU, "auto" the GPU when there is one, else the CPU.
Device resolve_device(const std::string& setting);
// One line for the log: the device, its name, and why when auto fell back to the CPU.
std::string describe_device(Device device, const std::string& setting);

class Runtime {
 public:
  explicit Runtime(Device device);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Device device() const { return ctx_.device; }
  Context& ctx() { return ctx_; }
  // Waits for the device's work on the stream (no-op on the CPU).
  void synchronize();

 private:
  Context ctx_;
  std::shared_ptr<void> owner_;  // the GPU resources behind ctx_
};

}  // namespace dt
