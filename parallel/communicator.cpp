#include "parallel/communicator.h"

#include <fmt/format.h>

#include "core/error.h"
#include "parallel/comm_backends.h"
#include "parallel/mpi_runtime.h"

namespace dt {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

std::string_view comm_backend_name(CommBackend b) {
  switch (b) {
    case CommBackend::kAuto: return "auto";
    case CommBackend::kSingle: return "single";
    case CommBackend::kMpi: return "mpi";
    case CommBackend::kNccl: return "nccl";
  }
  return "?";
}

bool mpi_built() {
#ifdef DELTATRON_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool nccl_built() {
#ifdef DELTATRON_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

class CompletedRequest final : public CommRequest {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<CommRequest> completed_request() { return std::make_unique<CompletedRequest>(); }

std::string Communicator::describe(std::string_view collective, const Tensor* t) const {
  return fmt::format("{}{} on communicator '{}' ({} backend, rank {} of {})", collective,
                     t ? " of " + t->str() : std::string(), name_, backend(), rank_, size_);
}

void Communicator::check_tensor(std::string_view collective, const Tensor& t, const char* arg) const {
  DT_CHECK(t.defined() || t.numel() == 0, "{}: argument '{}' is undefined", describe(collective), arg);
  DT_CHECK(t.device == device_,
           "{}: argument '{}' is on the {} but this communicator takes {} tensors{}", describe(collective, &t), arg,
           t.device == Device::kCPU ? "CPU" : "GPU", device_ == Device::kCPU ? "CPU" : "GPU",
           device_ == Device::kCPU ? " (GPU tensors go through an NCCL communicator)" : "");
  DT_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kF64 || t.dtype == DType::kBF16 || t.dtype == DType::kI32,
           "{}: argument '{}' has dtype {}; collectives take f32, f64, bf16 or i32", describe(collective, &t), arg,
           dtype_name(t.dtype));
  DT_CHECK(t.is_contiguous(), "{}: argument '{}' is not contiguous; copy it into a contiguous buffer first",
           describe(collective, &t), arg);
}

std::unique_ptr<CommRequest> Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t, "t");
  DT_CHECK(!(op == ReduceOp::kAvg && t.dtype == DType::kI32), "{}: avg needs a floating-point tensor",
           describe("all_reduce", &t));
  if (t.numel() == 0) return completed_request();
  return do_all_reduce(t, op);
}

std::unique_ptr<CommRequest> Communicator::reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor("reduce_scatter", out, "out");
  check_tensor("reduce_scatter", in, "in");
  DT_CHECK(in.dtype == out.dtype, "{}: out is {} but in is {}", describe("reduce_scatter", &in),
           dtype_name(out.dtype), dtype_name(in.dtype));
  DT_CHECK(in.numel() == out.numel() * size_,
           "{}: in must hold {} chunks of out's {} elements ({}), got {} elements", describe("reduce_scatter", &in),
           size_, out.numel(), out.numel() * size_, in.numel());
  DT_CHECK(!(op == ReduceOp::kAvg && in.dtype == DType::kI32), "{}: avg needs a floating-point tensor",
           describe("reduce_scatter", &in));
  if (out.numel() == 0) return completed_request();
  return do_reduce_scatter(out, in, op);
}

std::unique_ptr<CommRequest> Communicator::all_gather_async(const Tensor& out, const Tensor& in) {
  check_tensor("all_gather", out, "out");
  check_tensor("all_gather", in, "in");
  DT_CHECK(in.dtype == out.dtype, "{}: out is {} but in is {}", describe("all_gather", &in), dtype_name(out.dtype),
           dtype_name(in.dtype));
  DT_CHECK(out.numel() == in.numel() * size_, "{}: out must hold {} x {} = {} elements, got {}",
           describe("all_gather", &in), size_, in.numel(), in.numel() * size_, out.numel());
  if (in.numel() == 0) return completed_request();
  // `in` is either out's own chunk or apart from out: no partial overlap.
  const char* o = static_cast<const char*>(out.data);
  const char* i = static_cast<const char*>(in.data);
  const bool own_chunk = i == o + static_cast<size_t>(rank_) * in.bytes();
  DT_CHECK(own_chunk || i + in.bytes() <= o || o + out.bytes() <= i,
           "{}: in overlaps out other than as out's own chunk (rank {}'s)", describe("all_gather", &in), rank_);
  return do_all_gather(out, in);
}

void Communicator::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t, "t");
  DT_CHECK(root >= 0 && root < size_, "{}: root {} is not a rank of the group", describe("broadcast", &t), root);
  if (t.numel() == 0) return;
  do_broadcast(t, root);
}

void Communicator::barrier() { do_barrier(); }

std::unique_ptr<Communicator> Communicator::split(int color, int key, std::string name) {
  DT_CHECK(color >= 0, "{}: split color must be >= 0, got {}", describe("split"), color);
  return do_split(color, key, std::move(name));
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& o) {
  DT_CHECK(o.timeout_s > 0, "collective timeout must be positive, got {} s", o.timeout_s);
  CommBackend b = o.backend;
  if (b == CommBackend::kAuto) {
    if (!several_ranks()) b = CommBackend::kSingle;
    else b = o.device == Device::kCPU ? CommBackend::kMpi : CommBackend::kNccl;
  }
  switch (b) {
    case CommBackend::kSingle:  // asked for explicitly, each rank is then a group of its own
      return make_single_communicator("world", o.device, o.timeout_s);
    case CommBackend::kMpi:
      DT_CHECK(o.device == Device::kCPU,
               "the MPI communicator takes CPU tensors; GPU tensors need the NCCL backend (device cuda)");
      return make_mpi_world_communicator(o.timeout_s);
    case CommBackend::kNccl: {
      DT_CHECK(o.device == Device::kCUDA, "the NCCL communicator takes GPU tensors; CPU tensors use MPI");
      // The unique id travels over MPI when several ranks run, else no bootstrap is needed.
      std::unique_ptr<Communicator> boot = several_ranks() ? make_mpi_world_communicator(o.timeout_s)
                                                           : make_single_communicator("bootstrap", Device::kCPU,
                                                                                      o.timeout_s);
      return make_nccl_communicator(*boot, o.cuda_device, o.stream, o.timeout_s);
    }
    case CommBackend::kAuto: break;
  }
  DT_FAIL("unknown communicator backend {}", static_cast<int>(b));
}

}  // namespace dt
