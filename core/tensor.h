// Tensor: a non-owning view (pointer, dtype, shape, strides, device).
// Memory is owned by an Arena (core/arena.h); views are cheap to copy.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace dt {

enum class Device : uint8_t { kCPU, kCUDA };

inline constexpr int kMaxDims = 6;

struct Shape {
  int ndim = 0;
  std::array<int64_t, kMaxDims> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  explicit Shape(const std::vector<int64_t>& d);
  int64_t operator[](int i) const { return dims[i < 0 ? i + ndim : i]; }
  int64_t numel() const;
  std::vector<int64_t> vec() const { return {dims.begin(), dims.begin() + ndim}; }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[2, 3, 4]"
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCPU;
  Shape shape;
  std::array<int64_t, kMaxDims> stride{};  // in elements

  Tensor() = default;
  Tensor(void* data, DType dtype, Device device, Shape shape);  // contiguous

  int ndim() const { return shape.ndim; }
  int64_t size(int i) const { return shape[i]; }
  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  bool defined() const { return data != nullptr; }

  // Typed pointer; checks the dtype (and that T matches it).
  template <class T>
  T* ptr() const {
    DT_CHECK(dtype_of<T>() == dtype, "tensor holds {}, asked for {}", dtype_name(dtype),
             dtype_name(dtype_of<T>()));
    return static_cast<T*>(data);
  }
  // Same memory, new shape (contiguous only; numel must match).
  Tensor view(Shape s) const;
  // Rows [start, start+len) of dimension 0.
  Tensor narrow0(int64_t start, int64_t len) const;
  std::string str() const;  // "f32[2, 3] cpu"
};

// Throws a dt::Error naming `what` unless t has exactly this shape.
void check_shape(const Tensor& t, const Shape& s, const char* what);

}  // namespace dt
