// fill: set every element of a tensor to one value. Tests use it to poison outputs
// (NaN) before each run, so that an element a kernel forgot to write fails the test.
#pragma once

#include "core/context.h"
#include "core/tensor.h"

namespace dt {

void fill(Context& ctx, const Tensor& t, double value);

#ifdef DELTATRON_HAVE_CUDA
void fill_cuda(const Tensor& t, double value, void* stream);  // kernels/cuda/fill.cu
#endif

}  // namespace dt
