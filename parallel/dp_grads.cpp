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

DpGradSync::DpGradSync(Communicator& dp, const Arena& grads, size_t bucket_bytes, DpGradMode mode)
    : dp_(dp), mode_(mode) {
  DT_CHECK(bucket_bytes > 0, "DP gradient sync: bucket size must be positive");
  DT_CHECK(grads.allocated(), "DP gradient sync: arena '{}' is not allocated yet; allocate it first", grads.kind());
  DT_CHECK(grads.device() == dp.device(), "DP gradient sync: arena '{}' is on the {} but the DP communicator '{}' "
           "takes {} tensors", grads.kind(), grads.device() == Device::kCPU ? "CPU" : "GPU", dp.name(),
           dp.device() == Device::kCPU ? "CPU" : "GPU");
  const auto& entries = grads.entries();
  arena_bytes_ = grads.bytes();
  arena_base_ = grads.base();
  slot_final_.assign(entries.size(), 0);
  slot_buckets_.resize(entries.size());
  if (entries.empty()) return;
  dtype_ = entries.front().dtype;
  for (const ArenaEntry& e : entries)
    DT_CHECK(e.dtype == dtype_ && is_float(dtype_),
             "DP gradient sync: arena '{}' mixes dtypes or is not floating point ('{}' is {}, '{}' is {}); pass "
             "the gradients as a list instead", grads.kind(), entries.front().name, dtype_name(dtype_), e.name,
             dtype_name(e.dtype));
  const size_t es = dtype_size(dtype_);
  const int64_t total = static_cast<int64_t>(grads.bytes() / es);
  const Tensor whole(grads.base(), dtype_, grads.device(), {total});
  const int64_t n = dp.size();
  int64_t per = std::max<int64_t>(1, static_cast<int64_t>(bucket_bytes / es));
  if (mode_ == DpGradMode::kShardedMean) per = std::max(n, per / n * n);  // whole chunks of equal length
  for (int64_t off = 0; off < total; off += per) {
    GradBucket b;
    b.offset = off;
    b.count = std::min(per, total - off);
    b.flat = flat_part(whole, off, b.count);
    if (mode_ == DpGradMode::kShardedMean) {
      const int64_t padded = (b.count + n - 1) / n * n, chunk = padded / n;
      if (padded != b.count) {  // the last bucket of an arena whose length the DP size does not divide
        b.in_place = false;
        b.flat = Tensor(nullptr, dtype_, grads.device(), {padded});  // the buffer comes in add_bucket
      }
      b.shard_offset = off + dp.rank() * chunk;
      b.shard_count = std::clamp<int64_t>(b.count - dp.rank() * chunk, 0, chunk);
    }
    const size_t lo = off * es, hi = lo + b.count * es;
    for (int s = 0; s < static_cast<int>(entries.size()); ++s)
      if (entries[s].bytes > 0 && entries[s].offset < hi && entries[s].offset + entries[s].bytes > lo) {
        b.members.push_back(s);
        slot_buckets_[s].push_back(num_buckets());
      }
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
    device_memset(buffer, 0, b.flat.bytes(), b.flat.device);  // padding: zeros
    b.flat.data = buffer;
  }
  pending_.push_back(static_cast<int>(b.members.size()));
  started_.push_back(0);
  buckets_.push_back(std::move(b));
  buffers_.push_back(buffer);
  inflight_.emplace_back();
}

Tensor DpGradSync::chunk_of(const Tensor& flat) const {
  const int64_t chunk = flat.numel() / dp_.size();
  return flat_part(flat, dp_.rank() * chunk, chunk);
}

void DpGradSync::start(int b) {
  DT_CHECK(b >= 0 && b < num_buckets(), "DP gradient sync: bucket {} does not exist ({} buckets)", b, num_buckets());
  DT_CHECK(!inflight_[b], "DP gradient sync: bucket {} started twice without wait()", b);
  const GradBucket& k = buckets_[b];
  const size_t es = dtype_size(k.flat.dtype);
  started_[b] = 1;
  if (mode_ == DpGradMode::kShardedMean) {
    if (!k.in_place) {  // the real elements into the padded buffer, zeros after them
      device_copy(k.flat.data, k.flat.device, static_cast<const char*>(arena_base_) + k.offset * es,
                  k.flat.device, k.count * es);
      device_memset(static_cast<char*>(k.flat.data) + k.count * es, 0, k.flat.bytes() - k.count * es,
                    k.flat.device);
    }
    inflight_[b] = dp_.reduce_scatter_async(chunk_of(k.flat), k.flat, ReduceOp::kAvg);  // in place
    return;
  }
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
  if (mode_ == DpGradMode::kShardedMean) {
    if (!k.in_place && k.shard_count > 0)  // this rank's reduced chunk, less padding, back to the arena
      device_copy(static_cast<char*>(arena_base_) + k.shard_offset * es, k.flat.device,
                  static_cast<const char*>(chunk_of(k.flat).data), k.flat.device, k.shard_count * es);
    return;
  }
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
  finish();
}

void DpGradSync::grads_ready(int first_slot, int end_slot) {
  const int n_slots = static_cast<int>(slot_final_.size());
  DT_CHECK(0 <= first_slot && first_slot <= end_slot && end_slot <= n_slots,
           "DP gradient sync: slots [{}, {}) reported ready, but the gradient arena has {} slots (a list sync "
           "cannot overlap)", first_slot, end_slot, n_slots);
  for (int s = first_slot; s < end_slot; ++s) {
    if (slot_final_[s]) continue;
    slot_final_[s] = 1;
    for (int b : slot_buckets_[s])
      if (--pending_[b] == 0 && !started_[b]) start(b);
  }
  for (auto& r : inflight_)  // progress (MPI posts an all-reduce's second phase only from here)
    if (r) r->test();
}

void DpGradSync::finish() {
  for (int b = 0; b < num_buckets(); ++b)
    if (!started_[b]) start(b);
  wait_all();
  for (int b = 0; b < num_buckets(); ++b) {
    started_[b] = 0;
    pending_[b] = static_cast<int>(buckets_[b].members.size());
  }
  std::fill(slot_final_.begin(), slot_final_.end(), 0);
}

std::vector<std::pair<int64_t, int64_t>> DpGradSync::shard_ranges() const {
  DT_CHECK(mode_ == DpGradMode::kShardedMean, "DP gradient sync: shard_ranges() needs the sharded mode (ZeRO-1)");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const GradBucket& b : buckets_)
    if (b.shard_count > 0) out.emplace_back(b.shard_offset, b.shard_count);
  return out;
}

int64_t DpGradSync::shard_numel() const {
  int64_t n = 0;
  for (const auto& r : shard_ranges()) n += r.second;
  return n;
}

void DpGradSync::all_gather_shards(const Arena& arena) {
  DT_CHECK(mode_ == DpGradMode::kShardedMean, "DP gradient sync: all_gather_shards() needs the sharded mode (ZeRO-1)");
  DT_CHECK(arena.allocated() && arena.bytes() == arena_bytes_ && arena.device() == dp_.device() &&
               (arena.entries().empty() || arena.entries().front().dtype == dtype_),
           "DP gradient sync: arena '{}' ({} bytes) is not laid out like the gradients ({} bytes of {})", arena.kind(),
           arena.bytes(), arena_bytes_, dtype_name(dtype_));
  for (int b = 0; b < num_buckets(); ++b)
    DT_CHECK(!inflight_[b], "DP gradient sync: all_gather_shards() while bucket {} is in flight; finish() first", b);
  const size_t es = dtype_size(dtype_);
  const Tensor whole(arena.base(), dtype_, arena.device(), {static_cast<int64_t>(arena_bytes_ / es)});
  std::vector<std::unique_ptr<CommRequest>> reqs(buckets_.size());
  for (int b = 0; b < num_buckets(); ++b) {
    const GradBucket& k = buckets_[b];
    if (k.in_place) {
      const Tensor part = flat_part(whole, k.offset, k.count);
      reqs[b] = dp_.all_gather_async(part, chunk_of(part));  // in place
      continue;
    }
    // Padded: this rank's chunk (real elements, then zeros) into the buffer, gathered there.
    const Tensor mine = chunk_of(k.flat);
    device_memset(mine.data, 0, mine.bytes(), k.flat.device);
    if (k.shard_count > 0)
      device_copy(mine.data, k.flat.device, static_cast<const char*>(arena.base()) + k.shard_offset * es,
                  k.flat.device, k.shard_count * es);
    reqs[b] = dp_.all_gather_async(k.flat, mine);
  }
  for (int b = 0; b < num_buckets(); ++b) {
    reqs[b]->wait();
    const GradBucket& k = buckets_[b];
    if (!k.in_place)
      device_copy(static_cast<char*>(arena.base()) + k.offset * es, k.flat.device, k.flat.data, k.flat.device,
                  k.count * es);
  }
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
    case DType::kF8E4M3: return false;  // never a gradient
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
  bool flag[1] = {local};
  any_rank_each(comm, flag);
  return flag[0];
}

void any_rank_each(Communicator& comm, std::span<bool> flags) {
  std::vector<int32_t> f(flags.begin(), flags.end());
  const int64_t n = static_cast<int64_t>(f.size());
  const size_t bytes = f.size() * sizeof(int32_t);
  if (comm.device() == Device::kCPU) {
    comm.all_reduce(Tensor(f.data(), DType::kI32, Device::kCPU, {n}), ReduceOp::kMax);
  } else {
    void* d = device_alloc(bytes, comm.device());
    device_copy(d, comm.device(), f.data(), Device::kCPU, bytes);
    comm.all_reduce(Tensor(d, DType::kI32, comm.device(), {n}), ReduceOp::kMax);
    device_copy(f.data(), Device::kCPU, d, comm.device(), bytes);
    device_free(d, comm.device());
  }
  for (size_t i = 0; i < f.size(); ++i) flags[i] = f[i] != 0;
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
