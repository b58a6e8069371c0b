// Arena: one allocation per kind (params, grads, optimizer state, activations,
// workspace) with a named table: name -> (dtype, shape, offset).
//
//   Arena acts("activations", Device::kCPU);
//   int h = acts.declare("layers.0.mlp.hidden", DType::kF32, {B, T, F});
//   acts.allocate();                 // the one allocation
//   Tensor hidden = acts.get(h);     // or acts.get("layers.0.mlp.hidden")
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace dt {

struct ArenaEntry {
  std::string name;
  DType dtype;
  Shape shape;
  size_t offset = 0;  // bytes from the arena's base, 256-byte aligned
  size_t bytes = 0;
};

class Arena {
 public:
  Arena(std::string kind, Device device);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Declare a named slot before allocate(); names are unique. Returns the slot index.
  int declare(const std::string& name, DType dtype, Shape shape);
  // A scratch slot shared by everyone who declares it under `name` with the same dtype and shape
  // (e.g. the backward temporaries of every layer of one kind: layers run one at a time). Returns
  // the existing slot when there is one.
  int declare_shared(const std::string& name, DType dtype, Shape shape);
  // The single allocation. Contents start zeroed.
  void allocate();
  bool allocated() const { return allocated_; }

  Tensor get(int slot) const;
  Tensor get(std::string_view name) const;
  bool contains(std::string_view name) const;
  int slot(std::string_view name) const;  // throws if absent

  const std::vector<ArenaEntry>& entries() const { return entries_; }
  const std::string& kind() const { return kind_; }
  Device device() const { return device_; }
  size_t bytes() const { return total_; }
  void* base() const { return base_; }
  void zero();

 private:
  std::string kind_;
  Device device_;
  std::vector<ArenaEntry> entries_;
  std::unordered_map<std::string, int> index_;
  size_t total_ = 0;
  void* base_ = nullptr;
  bool allocated_ = false;
};

}  // namespace dt
