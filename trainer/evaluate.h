// Validation loss: the mean of the model's loss over the first `batches` batches of a loader.
// The loader is reset first, so every evaluation sees the same tokens and values are
// comparable across steps (the loader should have shuffle = false).
#pragma once

#include <cstdint>
#include <vector>

#include "core/context.h"
#include "data/loader.h"
#include "layers/model.h"

namespace dt {

double evaluate(Model& model, Context& ctx, DataLoader& loader, int64_t batches);

}  // namespace dt
