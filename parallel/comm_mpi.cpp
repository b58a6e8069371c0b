// The MPI communicator: CPU tensors, the backend CI runs under `mpirun`.
//
// Every collective is nonblocking underneath (MPI_Ialltoallv, MPI_Iallgatherv, MPI_Ibcast, ...) and
// waited for by polling MPI_Test against a deadline, which gives the timeout (no watchdog thread,
// no MPI thread level above FUNNELED).
//
// all_reduce, deterministic (every rank gets the same bits, whatever MPI's algorithms):
//   phase 1  all-to-all: rank r receives chunk r of every rank's tensor       (MPI_Ialltoallv, bytes)
//            rank r reduces its chunk over the ranks in rank order            (reduce_in_rank_order)
//   phase 2  all-gather of the reduced chunks, in place                       (MPI_Iallgatherv, bytes)
// The same traffic as a ring all-reduce, and MPI never adds two floats itself.
//
// MPI needs every rank to post the collectives of a communicator in the same order. Phase 1 is
// posted when the collective is called (program order, the same on every rank); phase 2 is posted
// later, when phase 1 has completed, so it goes to a second duplicate of the communicator and in
// the order the collectives were called (a FIFO), never in the order their phase 1 happened to
// complete on this rank.
#include <deque>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/comm_backends.h"
#include "parallel/reduce_order.h"

#ifdef DELTATRON_HAVE_MPI
#include <mpi.h>
#endif

namespace dt {

#ifdef DELTATRON_HAVE_MPI

namespace {

[[noreturn]] void mpi_fail(int rc, const std::string& what, const char* call) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  abort_job(fmt::format("{}: {} failed: {}", what, call, std::string(msg, len)));
}

#define DT_MPI_OK(call, what)                           \
  do {                                                  \
    int rc_ = (call);                                   \
    if (rc_ != MPI_SUCCESS) mpi_fail(rc_, what, #call); \
  } while (0)

class MpiCommunicator;

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MpiCommunicator* comm, std::string what) : comm_(comm), what_(std::move(what)) {}
  ~MpiRequest() override;
  bool test() override;
  void wait() override;

 private:
  friend class MpiCommunicator;
  MpiCommunicator* comm_;
  std::string what_;                        // for messages: "all_reduce of f32[..] on communicator ..."
  MPI_Request req1_ = MPI_REQUEST_NULL;     // phase 1, on comm_a
  MPI_Request req2_ = MPI_REQUEST_NULL;     // phase 2, on comm_b
  std::function<void()> after1_;            // local work once phase 1 completed (the reduction)
  std::function<void(MPI_Request*)> post2_; // posts phase 2; empty for one-phase collectives
  bool phase1_done_ = false, posted2_ = false, done_ = false;
  std::vector<char> scratch_;               // what phase 1 receives
  // Byte counts and offsets per rank: the standard wants them unchanged until completion.
  std::vector<int> counts_, displs_;        // of the tensor's chunks (sent in phase 1, gathered in phase 2)
  std::vector<int> recv_counts_, recv_displs_;  // of scratch_
};

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (duplicates it once more for phase 2).
  MpiCommunicator(MPI_Comm comm, std::string name, double timeout_s)
      : Communicator(comm_rank(comm), comm_size(comm), std::move(name), Device::kCPU, timeout_s), comm_a_(comm) {
    MPI_Comm_set_errhandler(comm_a_, MPI_ERRORS_RETURN);
    DT_MPI_OK(MPI_Comm_dup(comm_a_, &comm_b_), describe("MPI_Comm_dup"));
    MPI_Comm_set_errhandler(comm_b_, MPI_ERRORS_RETURN);
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    MPI_Comm_free(&comm_a_);
    MPI_Comm_free(&comm_b_);
  }
  std::string_view backend() const override { return "mpi"; }

  // Posts the phase 2 of queued requests, oldest first, as far as their phase 1 has completed.
  void progress() {
    while (!queue_.empty()) {
      MpiRequest* r = queue_.front();
      if (!r->phase1_done_) {
        int flag = 0;
        DT_MPI_OK(MPI_Test(&r->req1_, &flag, MPI_STATUS_IGNORE), r->what_);
        if (!flag) return;
        r->phase1_done_ = true;
        if (r->after1_) r->after1_();
      }
      r->post2_(&r->req2_);
      r->posted2_ = true;
      queue_.pop_front();
    }
  }
  void forget(MpiRequest* r) { std::erase(queue_, r); }
  MPI_Comm comm_b() const { return comm_b_; }

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor& t, ReduceOp op) override {
    const std::string what = describe(fmt::format("all_reduce({})", reduce_op_name(op)), &t);
    check_bytes(t.bytes(), what);
    const int n = size();
    const int64_t count = t.numel(), es = static_cast<int64_t>(dtype_size(t.dtype));
    auto chunk_begin = [&](int r) { return count * r / n; };  // rank r reduces elements [begin(r), begin(r+1))
    auto req = std::make_unique<MpiRequest>(this, what);
    req->counts_.resize(n);
    req->displs_.resize(n);
    for (int r = 0; r < n; ++r) {
      req->counts_[r] = static_cast<int>((chunk_begin(r + 1) - chunk_begin(r)) * es);
      req->displs_[r] = static_cast<int>(chunk_begin(r) * es);
    }
    const int mine = req->counts_[rank()];
    req->scratch_.resize(static_cast<size_t>(mine) * n + 1);
    req->recv_counts_.assign(n, mine);
    req->recv_displs_.resize(n);
    for (int r = 0; r < n; ++r) req->recv_displs_[r] = r * mine;
    DT_MPI_OK(MPI_Ialltoallv(t.data, req->counts_.data(), req->displs_.data(), MPI_BYTE, req->scratch_.data(),
                             req->recv_counts_.data(), req->recv_displs_.data(), MPI_BYTE, comm_a_, &req->req1_),
              what);
    MpiRequest* raw = req.get();
    char* base = static_cast<char*>(t.data);
    const DType dtype = t.dtype;
    req->after1_ = [raw, base, dtype, op, n, mine, es, this] {
      std::vector<const void*> srcs(n);
      for (int r = 0; r < n; ++r) srcs[r] = raw->scratch_.data() + static_cast<size_t>(r) * mine;
      reduce_in_rank_order(dtype, op, srcs, base + raw->displs_[rank()], mine / es);
    };
    req->post2_ = [raw, base, this](MPI_Request* out) {
      DT_MPI_OK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, raw->counts_.data(), raw->displs_.data(),
                                MPI_BYTE, comm_b_, out),
                raw->what_);
    };
    queue_.push_back(raw);
    return req;
  }

  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    const std::string what = describe(fmt::format("reduce_scatter({})", reduce_op_name(op)), &in);
    check_bytes(in.bytes(), what);
    const int n = size();
    const int bytes = static_cast<int>(out.bytes());
    auto req = std::make_unique<MpiRequest>(this, what);
    req->scratch_.resize(static_cast<size_t>(bytes) * n);
    DT_MPI_OK(MPI_Ialltoall(in.data, bytes, MPI_BYTE, req->scratch_.data(), bytes, MPI_BYTE, comm_a_, &req->req1_),
              what);
    MpiRequest* raw = req.get();
    const Tensor o = out;
    req->after1_ = [raw, o, op, n, bytes] {
      std::vector<const void*> srcs(n);
      for (int r = 0; r < n; ++r) srcs[r] = raw->scratch_.data() + static_cast<size_t>(r) * bytes;
      reduce_in_rank_order(o.dtype, op, srcs, o.data, o.numel());
    };
    return req;
  }

  std::unique_ptr<CommRequest> do_all_gather(const Tensor& out, const Tensor& in) override {
    const std::string what = describe("all_gather", &in);
    check_bytes(out.bytes(), what);
    const int bytes = static_cast<int>(in.bytes());
    const bool in_place = static_cast<char*>(in.data) == static_cast<char*>(out.data) + static_cast<size_t>(rank()) * bytes;
    auto req = std::make_unique<MpiRequest>(this, what);
    DT_MPI_OK(MPI_Iallgather(in_place ? MPI_IN_PLACE : in.data, bytes, MPI_BYTE, out.data, bytes, MPI_BYTE, comm_a_,
                             &req->req1_),
              what);
    return req;
  }

  void do_broadcast(const Tensor& t, int root) override {
    const std::string what = describe(fmt::format("broadcast(root {})", root), &t);
    check_bytes(t.bytes(), what);
    MpiRequest req(this, what);
    DT_MPI_OK(MPI_Ibcast(t.data, static_cast<int>(t.bytes()), MPI_BYTE, root, comm_a_, &req.req1_), what);
    req.wait();
  }

  void do_barrier() override {
    MpiRequest req(this, describe("barrier"));
    DT_MPI_OK(MPI_Ibarrier(comm_a_, &req.req1_), req.what_);
    req.wait();
  }

  std::unique_ptr<Communicator> do_split(int color, int key, std::string name) override {
    // MPI_Comm_split blocks with no timeout: first meet in a barrier that has one.
    do_barrier();
    MPI_Comm sub = MPI_COMM_NULL;
    DT_MPI_OK(MPI_Comm_split(comm_a_, color, key, &sub), describe("split"));
    return std::make_unique<MpiCommunicator>(sub, std::move(name), timeout_s());
  }

 private:
  static int comm_rank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  static int comm_size(MPI_Comm c) {
    int s = 0;
    MPI_Comm_size(c, &s);
    return s;
  }
  static void check_bytes(size_t bytes, const std::string& what) {
    // MPI counts are int; DpGradSync's buckets (25 MiB) stay far below.
    DT_CHECK(bytes <= static_cast<size_t>(std::numeric_limits<int>::max()),
             "{}: {} bytes is more than one MPI call moves (2^31 - 1); split the tensor", what, bytes);
  }

  MPI_Comm comm_a_ = MPI_COMM_NULL;  // phase 1 and one-phase collectives, posted in program order
  MPI_Comm comm_b_ = MPI_COMM_NULL;  // phase 2, posted in the FIFO order of queue_
  std::deque<MpiRequest*> queue_;    // requests whose phase 2 is not posted yet, oldest first
};

MpiRequest::~MpiRequest() {
  if (!done_) wait();
  comm_->forget(this);
}

bool MpiRequest::test() {
  if (done_) return true;
  comm_->progress();
  if (!phase1_done_) {
    if (post2_) return false;  // progress() moves queued requests along, in order
    int flag = 0;
    DT_MPI_OK(MPI_Test(&req1_, &flag, MPI_STATUS_IGNORE), what_);
    if (!flag) return false;
    phase1_done_ = true;
    if (after1_) after1_();
  }
  if (post2_) {
    if (!posted2_) return false;
    int flag = 0;
    DT_MPI_OK(MPI_Test(&req2_, &flag, MPI_STATUS_IGNORE), what_);
    if (!flag) return false;
  }
  done_ = true;
  return true;
}

void MpiRequest::wait() { poll_until([this] { return test(); }, comm_->timeout_s(), what_); }

}  // namespace

std::unique_ptr<Communicator> make_mpi_world_communicator(double timeout_s) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  DT_CHECK(init && !fin, "the MPI communicator needs MPI started: create a dt::MpiRuntime first (in main), and "
                         "launch the ranks with mpirun");
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  return std::make_unique<MpiCommunicator>(world, "world", timeout_s);
}

#else  // no MPI in this build

std::unique_ptr<Communicator> make_mpi_world_communicator(double) {
  DT_FAIL("this build has no MPI: install libopenmpi-dev and openmpi-bin (scripts/install_deps.sh) and rebuild "
          "with -DDELTATRON_MPI=ON");
}

#endif

}  // namespace dt
