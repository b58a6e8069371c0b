#include "core/tensor.h"

#include <fmt/format.h>

namespace dt {

Shape::Shape(std::initializer_list<int64_t> d) {
  DT_CHECK(d.size() <= kMaxDims, "tensor rank {} exceeds {}", d.size(), kMaxDims);
  for (int64_t x : d) dims[ndim++] = x;
}

Shape::Shape(const std::vector<int64_t>& d) {
  DT_CHECK(d.size() <= kMaxDims, "tensor rank {} exceeds {}", d.size(), kMaxDims);
  for (int64_t x : d) dims[ndim++] = x;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim != o.ndim) return false;
  for (int i = 0; i < ndim; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Tensor::Tensor(void* d, DType t, Device dev, Shape s) : data(d), dtype(t), device(dev), shape(s) {
  int64_t st = 1;
  for (int i = s.ndim - 1; i >= 0; --i) {
    stride[i] = st;
    st *= s.dims[i];
  }
}

bool Tensor::is_contiguous() const {
  int64_t st = 1;
  for (int i = shape.ndim - 1; i >= 0; --i) {
    if (shape.dims[i] != 1 && stride[i] != st) return false;
    st *= shape.dims[i];
  }
  return true;
}

Tensor Tensor::view(Shape s) const {
  DT_CHECK(is_contiguous(), "view of a non-contiguous tensor {}", str());
  DT_CHECK(s.numel() == numel(), "cannot view {} as {}", str(), s.str());
  return Tensor(data, dtype, device, s);
}

Tensor Tensor::narrow0(int64_t start, int64_t len) const {
  DT_CHECK(ndim() >= 1 && start >= 0 && len >= 0 && start + len <= shape[0],
           "narrow0({}, {}) out of range for {}", start, len, str());
  Tensor t = *this;
  t.shape.dims[0] = len;
  t.data = static_cast<char*>(data) + start * stride[0] * static_cast<int64_t>(dtype_size(dtype));
  return t;
}

std::string Tensor::str() const {
  return fmt::format("{}{} {}", dtype_name(dtype), shape.str(), device == Device::kCPU ? "cpu" : "cuda");
}

void check_shape(const Tensor& t, const Shape& s, const char* what) {
  DT_CHECK(t.shape == s, "{}: expected shape {}, got {}", what, s.str(), t.shape.str());
}

}  // namespace dt
