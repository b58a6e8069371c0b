// The single-process communicator: a group of one. all_reduce is the identity (sum, max and avg of
// one value are that value), reduce_scatter and all_gather copy, broadcast and barrier do nothing.
#include <string>

#include "core/device.h"
#include "parallel/comm_backends.h"

namespace dt {

namespace {

class SingleCommunicator final : public Communicator {
 public:
  SingleCommunicator(std::string name, Device device, double timeout_s)
      : Communicator(0, 1, std::move(name), device, timeout_s) {}
  std::string_view backend() const override { return "single"; }

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor&, ReduceOp) override { return completed_request(); }
  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp) override {
    if (out.data != in.data) device_copy(out.data, out.device, in.data, in.device, out.bytes());
    return completed_request();
  }
  std::unique_ptr<CommRequest> do_all_gather(const Tensor& out, const Tensor& in) override {
    if (out.data != in.data) device_copy(out.data, out.device, in.data, in.device, out.bytes());
    return completed_request();
  }
  void do_broadcast(const Tensor&, int) override {}
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int, int, std::string name) override {
    return std::make_unique<SingleCommunicator>(std::move(name), device(), timeout_s());
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator(std::string name, Device device, double timeout_s) {
  return std::make_unique<SingleCommunicator>(std::move(name), device, timeout_s);
}

}  // namespace dt
