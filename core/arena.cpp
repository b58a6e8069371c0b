#include "core/arena.h"

#include "core/device.h"

namespace dt {

Arena::Arena(std::string kind, Device device) : kind_(std::move(kind)), device_(device) {}

Arena::~Arena() { device_free(base_, device_); }

int Arena::declare(const std::string& name, DType dtype, Shape shape) {
  DT_CHECK(!allocated_, "arena '{}': cannot declare '{}' after allocation", kind_, name);
  DT_CHECK(!index_.count(name), "arena '{}': '{}' declared twice", kind_, name);
  for (int i = 0; i < shape.ndim; ++i)
    DT_CHECK(shape.dims[i] >= 0, "arena '{}': '{}' has negative shape {}", kind_, name, shape.str());
  ArenaEntry e{name, dtype, shape, total_, static_cast<size_t>(shape.numel()) * dtype_size(dtype)};
  total_ += (e.bytes + 255) / 256 * 256;
  index_.emplace(name, static_cast<int>(entries_.size()));
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size()) - 1;
}

int Arena::declare_shared(const std::string& name, DType dtype, Shape shape) {
  auto it = index_.find(name);
  if (it == index_.end()) return declare(name, dtype, shape);
  const ArenaEntry& e = entries_[it->second];
  DT_CHECK(e.dtype == dtype && e.shape == shape, "arena '{}': shared slot '{}' is {} {} but now asked as {} {}", kind_,
           name, dtype_name(e.dtype), e.shape.str(), dtype_name(dtype), shape.str());
  return it->second;
}

void Arena::allocate() {
  DT_CHECK(!allocated_, "arena '{}' allocated twice", kind_);
  allocated_ = true;
  if (total_ == 0) return;
  base_ = device_alloc(total_, device_);
  device_memset(base_, 0, total_, device_);
}

Tensor Arena::get(int slot) const {
  DT_CHECK(allocated_, "arena '{}' used before allocate()", kind_);
  DT_CHECK(slot >= 0 && slot < static_cast<int>(entries_.size()), "arena '{}': bad slot {}", kind_, slot);
  const ArenaEntry& e = entries_[slot];
  return Tensor(static_cast<char*>(base_) + e.offset, e.dtype, device_, e.shape);
}

int Arena::slot(std::string_view name) const {
  auto it = index_.find(std::string(name));
  DT_CHECK(it != index_.end(), "arena '{}' has no entry '{}'", kind_, name);
  return it->second;
}

Tensor Arena::get(std::string_view name) const { return get(slot(name)); }

bool Arena::contains(std::string_view name) const { return index_.count(std::string(name)) != 0; }

void Arena::zero() {
  if (base_) device_memset(base_, 0, total_, device_);
}

}  // namespace dt
