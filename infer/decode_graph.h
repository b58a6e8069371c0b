// A CUDA graph of one decode step: the kernels of a step recorded once from ctx.stream and replayed
// for every later token, so that a step costs one launch on the host instead of one per op (a
// small model's step is otherwise bound by the host's launch rate).
//
//   DecodeGraph g;
//   g.capture(ctx, [&] { run_the_step(ctx); });   // records; runs nothing
//   g.replay(ctx);                                 // runs the recorded kernels on ctx.stream
//
// What is recorded is fixed: the kernels, their grids and arguments, every pointer. A step whose
// position must change reads it from a device counter that the step itself advances (infer/
// decode_ops.h). The body must not synchronise, allocate, or copy through the host; a call that
// does fails the capture with a CUDA error naming it. Builds without CUDA: capture() is an error.
#pragma once

#include <functional>
#include <memory>

#include "core/context.h"

namespace dt {

class DecodeGraph {
 public:
  DecodeGraph();
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // Records body's work on ctx.stream (replacing what was recorded before). When body throws, the
  // capture is abandoned (the stream is usable again) and the error passes on.
  void capture(Context& ctx, const std::function<void()>& body);
  bool ready() const;
  void replay(Context& ctx);  // asynchronous on ctx.stream
  void reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dt
