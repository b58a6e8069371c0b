#include "parallel/dp_grads.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/error.h"

namespace dt {

namespace {

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16; }

const char* end_of(const Tensor& t) { return static_cast<const char*>(t.data) + t.bytes(); }

// A 1-D view of `count` elements of t starting at element `offset`.
Tensor flat_part(const Tensor& t, int64_t offset, int64_t count) {
  return Tensor(static_cast<char*>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype)), t.dtype, t.device,
                {count});
}

}  // namespace

DpGradSync::DpGradSync(Communicator& dp, std::span<const Tensor> grads, size_t bucket_bytes)
    : dp_(dp), grads_(grads.begin(), grads.end()) {
  DT_CHECK(bucket_bytes > 0, "DP gradient sync: bucket size must be positive");
  for (size_t i = 0; i < grads_.size(); ++i) {
    const Tensor& g = grads_[i];
    DT_CHECK(!g.defined() || g.numel() == 0 || (g.is_contiguous() && is_float(g.dtype) && g.device == dp.device()),
             "DP gradient sync: gradient {} ({}) must be a contiguous floating-point tensor on the {} (the DP "
             "communicator's device)", i, g.str(), dp.device() == Device::kCPU ? "CPU" : "GPU");
  }
  std::vector<int> cur;  // gradients gathered for the next bucket
  size_t cur_bytes = 0;
  auto flush = [&] {
    if (cur.empty()) return;
    GradBucket b;
    b.members = cur;
    const Tensor& first = grads_[cur.front()];
    bool adjacent = true;
    for (size_t k = 1; k < cur.size(); ++k) adjacent = adjacent && grads_[cur[k]].data == end_of(grads_[cur[k - 1]]);
    const int64_t total = static_cast<int64_t>(cur_bytes / dtype_size(first.dtype));
    if (adjacent) {
      b.flat = flat_part(first, 0, total);
    } else {
      b.in_place = false;
      int64_t at = 0;
      for (int m : cur) {
        b.pieces.push_back({m, 0, grads_[m].numel(), at});
        at += grads_[m].numel();
      }
      b.flat = Tensor(nullptr, first.dtype, first.device, {total});  // the buffer comes in add_bucket
    }
    add_bucket(std::move(b));
    cur.clear();
    cur_bytes = 0;
  };
  for (int i = 0; i < static_cast<int>(grads_.size()); ++i) {
    const Tensor& g = grads_[i];
    if (!g.defined() || g.numel() == 0) continue;  // no gradient
    if (g.bytes() > bucket_bytes) {  // its own in-place parts
      flush();
      const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(bucket_bytes / dtype_size(g.dtype)));
      for (int64_t off = 0; off < g.numel(); off += per) {
        GradBucket b;
        b.members = {i};
        b.flat = flat_part(g, off, std::min(per, g.numel() - off));
        add_bucket(std::move(b));
      }
      continue;
    }
    if (!cur.empty() && (grads_[cur.front()].dtype != g.dtype || cur_bytes + g.bytes() > bucket_bytes)) flush();
    cur.push_back(i);
    cur_bytes += g.bytes();
  }
  flush();
}

DpGradSync::DpGradSync(Communicator& dp, const Arena& grads, size_t bucket_bytes) : dp_(dp) {
  DT_CHECK(bucket_bytes > 0, "DP gradient sync: bucket size must be positive");
  DT_CHECK(grads.allocated(), "DP gradient sync: arena '{}' is not allocated yet; allocate it first", grads.kind());
  DT_CHECK(grads.device() == dp.device(), "DP gradient sync: arena '{}' is on the {} but the DP communicator '{}' "
           "takes {} tensors", grads.kind(), grads.device() == Device::kCPU ? "CPU" : "GPU", dp.name(),
           dp.device() == Device::kCPU ? "CPU" : "GPU");
  const auto& entries = grads.entries();
  if (entries.empty()) return;
  const DType dtype = entries.front().dtype;
  for (const ArenaEntry& e : entries)
    DT_CHECK(e.dtype == dtype && is_float(dtype),
             "DP gradient sync: arena '{}' mixes dtypes or is not floating point ('{}' is {}, '{}' is {}); pass "
             "the gradients as a list instead", grads.kind(), entries.front().name, dtype_name(dtype), e.name,
             dtype_name(e.dtype));
  const size_t es = dtype_size(dtype);
  const int64_t total = static_cast<int64_t>(grads.bytes() / es);
  const Tensor whole(grads.base(), dtype, grads.device(), {total});
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(bucket_bytes / es));
  for (int64_t off = 0; off < total; off += per) {
    GradBucket b;
    b.flat = flat_part(whole, off, std::min(per, total - off));
    const size_t lo = off * es, hi = lo + b.flat.bytes();
    for (int s = 0; s < static_cast<int>(entries.size()); ++s)
      if (entries[s].bytes > 0 && entries[s].offset < hi && entries[s].offset + entries[s].bytes > lo)
        b.members.push_back(s);
    add_bucket(std::move(b));
  }
}

DpGradSync::~DpGradSync() {
  inflight_.clear();  // waits for what is still in flight before the buffers go
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b]) device_free(buffers_[b], buckets_[b].flat.device);
}

void DpGradSync::add_bucket(GradBucket b) {
  void* buffer = nullptr;
  if (!b.in_place) {
    buffer = device_alloc(b.flat.bytes(), b.flat.device);
    b.flat.data = buffer;
  }
  buckets_.push_back(std::move(b));
  buffers_.push_back(buffer);
  inflight_.emplace_back();
}

void DpGradSync::start(int b) {
  DT_CHECK(b >= 0 && b < num_buckets(), "DP gradient sync: bucket {} does not exist ({} buckets)", b, num_buckets());
  DT_CHECK(!inflight_[b], "DP gradient sync: bucket {} started twice without wait()", b);
  const GradBucket& k = buckets_[b];
  const size_t es = dtype_size(k.flat.dtype);
  for (const GradBucket::Piece& p : k.pieces)
    device_copy(static_cast<char*>(k.flat.data) + p.dst_offset * es, k.flat.device,
                static_cast<const char*>(grads_[p.member].data) + p.src_offset * es, grads_[p.member].device,
                p.count * es);
  inflight_[b] = dp_.all_reduce_async(k.flat, ReduceOp::kAvg);
}

void DpGradSync::wait(int b) {
  DT_CHECK(b >= 0 && b < num_buckets(), "DP gradient sync: bucket {} does not exist ({} buckets)", b, num_buckets());
  DT_CHECK(inflight_[b] != nullptr, "DP gradient sync: wait() for bucket {}, which was not started", b);
  inflight_[b]->wait();
  inflight_[b].reset();
  const GradBucket& k = buckets_[b];
  const size_t es = dtype_size(k.flat.dtype);
  for (const GradBucket::Piece& p : k.pieces)
    device_copy(static_cast<char*>(grads_[p.member].data) + p.src_offset * es, grads_[p.member].device,
                static_cast<const char*>(k.flat.data) + p.dst_offset * es, k.flat.device, p.count * es);
}

void DpGradSync::wait_all() {
  for (int b = 0; b < num_buckets(); ++b)
    if (inflight_[b]) wait(b);
}

void DpGradSync::all_reduce_mean() {
  for (int b = 0; b < num_buckets(); ++b) start(b);
  wait_all();
}

namespace {

template <class T, class ToFloat>
bool scan_nonfinite(const void* p, int64_t n, ToFloat to_float) {
  const T* x = static_cast<const T*>(p);
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(to_float(x[i]));
  return bad;
}

bool host_nonfinite(DType dtype, const void* p, int64_t n) {
  auto same = [](auto v) { return v; };
  switch (dtype) {
    case DType::kF32: return scan_nonfinite<float>(p, n, same);
    case DType::kF64: return scan_nonfinite<double>(p, n, same);
    case DType::kBF16: return scan_nonfinite<uint16_t>(p, n, [](uint16_t h) { return bf16_to_f32(h); });
    case DType::kI32:
    case DType::kU16: return false;  // integers are always finite
  }
  return false;
}

}  // namespace

bool any_nonfinite(Communicator& comm, std::span<const Tensor> tensors) {
  bool local = false;
  std::vector<char> host;
  for (const Tensor& t : tensors) {
    if (t.numel() == 0 || local) continue;
    DT_CHECK(t.defined() && t.is_contiguous(), "any_nonfinite: tensor {} must be contiguous", t.str());
    if (t.device == Device::kCPU) {
      local = host_nonfinite(t.dtype, t.data, t.numel());
    } else {
      host.resize(t.bytes());
      device_copy(host.data(), Device::kCPU, t.data, t.device, t.bytes());
      local = host_nonfinite(t.dtype, host.data(), t.numel());
    }
  }
  return any_rank(comm, local);
}

bool any_rank(Communicator& comm, bool local) {
  int32_t flag = local ? 1 : 0;
  if (comm.device() == Device::kCPU) {
    comm.all_reduce(Tensor(&flag, DType::kI32, Device::kCPU, {1}), ReduceOp::kMax);
    return flag != 0;
  }
  void* d = device_alloc(sizeof(flag), comm.device());
  device_copy(d, comm.device(), &flag, Device::kCPU, sizeof(flag));
  comm.all_reduce(Tensor(d, DType::kI32, comm.device(), {1}), ReduceOp::kMax);
  device_copy(&flag, Device::kCPU, d, comm.device(), sizeof(flag));
  device_free(d, comm.device());
  return flag != 0;
}

double all_reduce_value(Communicator& comm, double value, ReduceOp op) {
  if (comm.device() == Device::kCPU) {
    comm.all_reduce(Tensor(&value, DType::kF64, Device::kCPU, {1}), op);
    return value;
  }
  void* d = device_alloc(sizeof(value), comm.device());
  device_copy(d, comm.device(), &value, Device::kCPU, sizeof(value));
  comm.all_reduce(Tensor(d, DType::kF64, comm.device(), {1}), op);
  device_copy(&value, Device::kCPU, d, comm.device(), sizeof(value));
  device_free(d, comm.device());
  return value;
}

}  // namespace dt
