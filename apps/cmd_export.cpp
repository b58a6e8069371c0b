// `deltatron export --format hf --checkpoint FILE --out DIR [--dtype fp32|bf16] [--force]`: a
// checkpoint as a Hugging Face model directory (hf/export.h; docs/export.md).
#include <cstdio>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "hf/export.h"

namespace dt {

namespace {

struct ExportArgs {
  std::string format;
  std::string checkpoint;
  std::string out;
  std::string dtype = "fp32";
  bool force = false;
  std::string tokenizer_dir = Tokenizer::default_dir();
};

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model directory");
  cmd->footer(
      "--format hf writes config.json (Qwen3_5ForCausalLM), generation_config.json, model.safetensors and\n"
      "GPT-2's tokenizer files, which transformers loads with AutoModelForCausalLM.from_pretrained(DIR) and\n"
      "AutoTokenizer.from_pretrained(DIR). Models Qwen3.5 cannot express (MLA layers, ungated attention, ...)\n"
      "are refused by name. The directory appears whole or not at all; an existing non-empty --out is refused\n"
      "unless --force, which replaces only an earlier export. See docs/export.md.\n"
      "Example: deltatron export --format hf --checkpoint runs/quickstart/checkpoints/step_00000150.h5 "
      "--out hf/quickstart --dtype bf16\n");
  cmd->add_option("--format", args->format, "Output format: hf (Hugging Face transformers)");
  cmd->add_option("--checkpoint", args->checkpoint, "Checkpoint file (<run dir>/checkpoints/step_*.h5)");
  cmd->add_option("--out", args->out, "Directory to write (must not hold files, unless --force)");
  cmd->add_option("--dtype", args->dtype, "Weights in fp32 (the master weights) or bf16 (rounded to nearest even)")
      ->capture_default_str();
  cmd->add_flag("--force", args->force, "Replace an earlier export in --out");
  cmd->add_option("--tokenizer", args->tokenizer_dir, "Directory with GPT-2's encoder.json and vocab.bpe")
      ->capture_default_str();
  cmd->callback([args] {
    DT_CHECK(!args->format.empty(), "export needs --format; the one format is hf (Hugging Face transformers)");
    DT_CHECK(args->format == "hf", "--format {}: unknown format; the one format is hf (Hugging Face transformers)",
             args->format);
    DT_CHECK(args->dtype == "fp32" || args->dtype == "bf16", "--dtype {}: give fp32 or bf16", args->dtype);
    HfExportOptions o;
    o.checkpoint = args->checkpoint;
    o.out = args->out;
    o.dtype = args->dtype == "bf16" ? DType::kBF16 : DType::kF32;
    o.force = args->force;
    o.tokenizer_dir = args->tokenizer_dir;
    const HfExportResult r = export_hf(o);
    std::printf("exported %s (step %lld) to %s: %lld tensors, %lld parameters in %s, model.safetensors %lld bytes\n",
                o.checkpoint.c_str(), static_cast<long long>(r.step), o.out.c_str(), static_cast<long long>(r.tensors),
                static_cast<long long>(r.parameters), args->dtype.c_str(), static_cast<long long>(r.bytes));
  });
}

}  // namespace dt
