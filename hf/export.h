// `deltatron export --format hf`: a checkpoint as a Hugging Face model directory that
// transformers loads with AutoModelForCausalLM and AutoTokenizer (docs/export.md):
//
//   config.json              Qwen3_5ForCausalLM's config (hf/qwen35.h, the one mapping)
//   generation_config.json   bos / eos = GPT-2's <|endoftext|>
//   model.safetensors        the fp32 master weights, or their bf16 rounding (io/safetensors.h)
//   vocab.json, merges.txt   GPT-2's BPE files (assets/gpt2: encoder.json, vocab.bpe), byte for byte
//   tokenizer_config.json, special_tokens_map.json
//
// The directory is written under a temporary name beside --out and renamed into place at the end,
// so a failed export leaves nothing; an --out that holds files is refused unless `force`, and even
// then only when it holds an earlier export (a config.json and a model.safetensors).
#pragma once

#include <string>

#include "core/dtype.h"

namespace dt {

struct HfExportOptions {
  std::string checkpoint;
  std::string out;
  DType dtype = DType::kF32;  // kF32 (the master weights) or kBF16 (rounded to nearest even)
  bool force = false;
  std::string tokenizer_dir;  // holds encoder.json and vocab.bpe
};

struct HfExportResult {
  int64_t step = 0;        // the checkpoint's training step
  int64_t tensors = 0;     // in model.safetensors
  int64_t parameters = 0;  // their elements
  int64_t bytes = 0;       // model.safetensors' size
};

HfExportResult export_hf(const HfExportOptions& options);

// GPT-2's vocabulary size (<|endoftext|> is its last id): a model must have at least this many
// embedding rows for the exported tokenizer's ids.
inline constexpr int kGpt2Vocab = 50257;

}  // namespace dt
