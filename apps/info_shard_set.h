// `deltatron info DIR`: the prepared shard sets in a directory, each checked against its manifest.
#pragma once

#include <string>

namespace dt {

// Prints every set of `dir` (data/manifest.h) with its shards, tokens, tokenizer and inputs, and
// checks each shard's size and SHA-256. Throws dt::Error listing the problems (a shard missing,
// changed or listed nowhere, `.tmp` leftovers of an interrupted prepare) after printing.
void info_shard_dir(const std::string& dir);

}  // namespace dt
