// Data-parallel gradient sync: every gradient becomes its mean over the DP group, in buckets of
// about bucket_bytes (PyTorch DDP's 25 MiB by default), so that a bucket can go as soon as the
// backward has written its gradients, overlapping the rest of the backward.
//
//   DpGradSync sync(*groups.dp, params.grads_arena());   // the whole arena, reduced in place
//   forward(); backward(); sync.all_reduce_mean();        // torch: for g in grads: all_reduce(g, AVG)
//   // or, overlapped: the backward reports finished slots, buckets start once all of theirs are final
//   model.backward(ctx, 1.0, [&](int first, int end) { sync.grads_ready(first, end); });
//   sync.finish();                                        // starts what is left, waits for everything
//   if (any_nonfinite(*groups.dp, grads)) skip the step;  // the same decision on every rank
//
// ZeRO-1 (DpGradMode::kShardedMean, arenas only): each bucket is reduce-scattered instead, so rank
// r holds the mean of chunk r of every bucket (its shard, shard_ranges()) and the other chunks keep
// its local gradients. After the sharded update, all_gather_shards(params.params_arena()) puts every
// rank's chunks of the masters together again (torch: reduce_scatter_tensor / all_gather_into_tensor).
// A bucket's length is a multiple of the DP size; the last one is padded with zeros in a buffer
// when the arena is not.
//
// Buckets are numbered from the start of memory (the arena) or of the list. start() is a
// collective: every DP rank starts the same buckets in the same order. The mean is the DP backend's
// avg (MPI: sum in rank order / size), so all ranks hold the same bits afterwards, whatever order
// the buckets were started in: the overlapped and the plain sync give the same bits.
//
// Streams (NCCL): a bucket's collective waits for the compute stream's work queued before start()
// and wait() makes the compute stream wait for it, without blocking the host
// (parallel/communicator.h); Communicator::synchronize() applies the timeout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace dt {

enum class DpGradMode : uint8_t {
  kMean,         // all-reduce avg: every rank holds every gradient's mean
  kShardedMean,  // ZeRO-1, reduce-scatter avg: rank r holds the mean of its chunk of every bucket
};

struct GradBucket {
  // What is communicated: a view of the gradients' own memory (in_place) or the bucket's buffer.
  Tensor flat;
  bool in_place = true;
  // Indices of the gradients (list) or arena slots it covers, in whole or in part.
  std::vector<int> members;
  // Packed buckets: member `member`'s elements [src_offset, src_offset + count) go to flat at dst_offset.
  struct Piece {
    int member;
    int64_t src_offset, count, dst_offset;
  };
  std::vector<Piece> pieces;
  // Arena buckets: elements [offset, offset + count) of the arena. kShardedMean: flat has
  // count rounded up to a multiple of the DP size (the padding zeros, in the buffer), and this rank
  // owns elements [shard_offset, shard_offset + shard_count) of the arena (its chunk, less padding).
  int64_t offset = 0, count = 0;
  int64_t shard_offset = 0, shard_count = 0;
};

class DpGradSync {
 public:
  static constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

  // Any list of gradients (contiguous, floating point, on dp's device; undefined ones are skipped).
  // Neighbours that sit back to back in memory share a bucket in place; others are packed into a
  // bucket buffer (copied in at start, out at wait). A gradient larger than a bucket is reduced in
  // place, in bucket-size parts. Mean only.
  DpGradSync(Communicator& dp, std::span<const Tensor> grads, size_t bucket_bytes = kDefaultBucketBytes);
  // A whole gradient arena (ParamStore::grads_arena()), in place: its one allocation in
  // bucket-size parts. The alignment padding between slots is reduced too; it is zero (arenas are
  // zeroed) and stays zero.
  DpGradSync(Communicator& dp, const Arena& grads, size_t bucket_bytes = kDefaultBucketBytes,
             DpGradMode mode = DpGradMode::kMean);
  ~DpGradSync();
  DpGradSync(const DpGradSync&) = delete;
  DpGradSync& operator=(const DpGradSync&) = delete;

  Communicator& comm() const { return dp_; }
  DpGradMode mode() const { return mode_; }
  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  const GradBucket& bucket(int b) const { return buckets_.at(b); }

  void start(int b);   // begins the mean of bucket b (collective, asynchronous)
  void wait(int b);    // until bucket b is done (its gradients hold the mean; NCCL: stream-side)
  void wait_all();     // waits for every started bucket
  void all_reduce_mean();  // start every bucket, then wait for all (kShardedMean: this rank's shard only)

  // Overlap with the backward (arenas): the gradients of arena slots [first_slot, end_slot) are
  // final. Starts every bucket whose slots are now all final, and moves the buckets in flight along
  // (MPI progresses only inside its calls). Collective: every rank reports the same slots in the
  // same order.
  void grads_ready(int first_slot, int end_slot);
  // Starts the buckets not started yet (in order), waits for all, and forgets what was reported
  // ready: the next step starts afresh.
  void finish();

  // kShardedMean: the arena elements this rank owns, (offset, count) per bucket in order, and
  // their total.
  std::vector<std::pair<int64_t, int64_t>> shard_ranges() const;
  int64_t shard_numel() const;
  // kShardedMean: `arena`, laid out like the gradients (the same entries: the masters, or moments
  // arranged so), gets chunk r of every bucket from DP rank r, in place. Collective; returns once the
  // compute stream is ordered after it (the host too on the CPU).
  void all_gather_shards(const Arena& arena);

 private:
  void add_bucket(GradBucket b);
  Tensor chunk_of(const Tensor& flat) const;  // this rank's chunk of a bucket's flat tensor

  Communicator& dp_;
  DpGradMode mode_ = DpGradMode::kMean;
  DType dtype_ = DType::kF32;
  void* arena_base_ = nullptr;     // arenas: the gradients' arena
  size_t arena_bytes_ = 0;        // and its size, checked against all_gather_shards' arena
  std::vector<Tensor> grads_;
  std::vector<GradBucket> buckets_;
  std::vector<void*> buffers_;  // packed or padded buckets' buffers (device_alloc), one per bucket or nullptr
  std::vector<std::unique_ptr<CommRequest>> inflight_;
  // Overlap: per bucket, started this step and members not yet final; per slot, final and its buckets.
  std::vector<char> started_;
  std::vector<int> pending_;
  std::vector<char> slot_final_;
  std::vector<std::vector<int>> slot_buckets_;
};

// True on every rank when any rank has a NaN or Inf in any of `tensors` (an all-reduce max of a
// flag), so that all ranks take the same skip decision. GPU tensors are copied to the host to be
// scanned; on the GPU prefer any_rank(comm, !std::isfinite(grad_norm)).
bool any_nonfinite(Communicator& comm, std::span<const Tensor> tensors);
// True on every rank when `local` is true on any rank.
bool any_rank(Communicator& comm, bool local);
// Several flags in one all-reduce: each becomes true where it is true on any rank.
void any_rank_each(Communicator& comm, std::span<bool> flags);
// The reduction of one number over the group (e.g. the mean loss), the same on every rank.
double all_reduce_value(Communicator& comm, double value, ReduceOp op);

}  // namespace dt
