// Data-parallel gradient sync: every gradient becomes its mean over the DP group, in buckets of
// about bucket_bytes (PyTorch DDP's 25 MiB by default), so that on the GPU a bucket can go as soon
// as the backward has written its gradients, overlapping the rest of the backward.
//
//   DpGradSync sync(*groups.dp, params.grads_arena());   // the whole arena, reduced in place
//   forward(); backward(); sync.all_reduce_mean();        // torch: for g in grads: all_reduce(g, AVG)
//   // or, overlapped: sync.start(b) when bucket b's gradients are done (bucket(b).members), then wait_all()
//   if (any_nonfinite(*groups.dp, grads)) skip the step;  // the same decision on every rank
//
// Buckets are numbered from the start of memory (the arena) or of the list. start() is a
// collective: every DP rank starts the same buckets in the same order. The mean is the DP backend's
// avg (MPI: sum in rank order / size), so all ranks hold the same bits afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "parallel/communicator.h"

namespace dt {

struct GradBucket {
  // What is all-reduced: a view of the gradients' own memory (in_place) or the bucket's buffer.
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
};

class DpGradSync {
 public:
  static constexpr size_t kDefaultBucketBytes = size_t{25} << 20;

  // Any list of gradients (contiguous, floating point, on dp's device; undefined ones are skipped).
  // Neighbours that sit back to back in memory share a bucket in place; others are packed into a
  // bucket buffer (copied in at start, out at wait). A gradient larger than a bucket is reduced in
  // place, in bucket-size parts.
  DpGradSync(Communicator& dp, std::span<const Tensor> grads, size_t bucket_bytes = kDefaultBucketBytes);
  // A whole gradient arena (ParamStore::grads_arena()), in place: its one allocation in
  // bucket-size parts. The alignment padding between slots is reduced too; it is zero (arenas are
  // zeroed) and stays zero.
  DpGradSync(Communicator& dp, const Arena& grads, size_t bucket_bytes = kDefaultBucketBytes);
  ~DpGradSync();
  DpGradSync(const DpGradSync&) = delete;
  DpGradSync& operator=(const DpGradSync&) = delete;

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  const GradBucket& bucket(int b) const { return buckets_.at(b); }

  void start(int b);   // begins the mean of bucket b (collective, asynchronous)
  void wait(int b);    // until bucket b is done (its gradients hold the mean)
  void wait_all();     // waits for every started bucket
  void all_reduce_mean();  // start every bucket, then wait for all

 private:
  void add_bucket(GradBucket b);

  Communicator& dp_;
  std::vector<Tensor> grads_;
  std::vector<GradBucket> buckets_;
  std::vector<void*> buffers_;  // packed buckets' buffers (device_alloc), one per bucket or nullptr
  std::vector<std::unique_ptr<CommRequest>> inflight_;
};

// True on every rank when any rank has a NaN or Inf in any of `tensors` (an all-reduce max of a
// flag), so that all ranks take the same skip decision. GPU tensors are copied to the host to be
// scanned; on the GPU prefer any_rank(comm, !std::isfinite(grad_norm)).
bool any_nonfinite(Communicator& comm, std::span<const Tensor> tensors);
// True on every rank when `local` is true on any rank.
bool any_rank(Communicator& comm, bool local);
// The reduction of one number over the group (e.g. the mean loss), the same on every rank.
double all_reduce_value(Communicator& comm, double value, ReduceOp op);

}  // namespace dt
