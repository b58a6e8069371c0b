// Bad input to every command-line flag, file path argument and file format of `deltatron`
// (docs/inputs.md is the table; the config keys are in test_bad_config.cpp). Each case runs the
// built binary in a scratch directory and expects exit code 1 and `deltatron: error: ` with the
// words that say what is wrong and where.
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/sha256.h"
#include "data/manifest.h"
#include "data/shard.h"
#include "tests/apps/bad_input_util.h"
#include "trainer/checkpoint_format.h"
#include "trainer/config.h"

namespace dt {
namespace {

using namespace bad_input;

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not found";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// ---- the command line itself (CLI11, every subcommand) ----

using BadCli = BadInput;

TEST_F(BadCli, UnknownCommandsFlagsAndArguments) {
  expect_error("", {"A subcommand is required"});
  expect_error("bogus", {"unknown command 'bogus'", "the commands are: prepare, info, train, eval"});
  expect_error("tokenize --bogus", {"not expected: --bogus"});
  expect_error("train --print-config --bogus", {"not expected: --bogus"});
  expect_error("info a.bin b.bin", {"not expected: b.bin"});
  expect_error("tokenize stray", {"not expected: stray"});
  expect_error("train --resume a.h5 b.h5", {"not expected: b.h5"});
}

TEST_F(BadCli, MissingValuesAndRequiredArguments) {
  for (const char* args : {"tokenize --input", "detokenize --tokenizer", "train --config", "train --set",
                           "train --run-dir", "eval --checkpoint", "eval --data", "info --show", "prepare --out"}) {
    const std::string flag = std::string(args).substr(std::string(args).find(' ') + 1);
    expect_error(args, {flag + ": 1 required"});
  }
  expect_error("info", {"file is required"});
  expect_error("prepare --out o", {"--input is required"});
  expect_error("prepare --input x.jsonl", {"--out is required"});
}

// Every numeric flag given a word, a fraction or a value out of its range; every boolean flag given a
// value that is not a boolean. Each message names the flag.
TEST_F(BadCli, NumericAndBooleanFlagsRejectOtherValues) {
  struct Case {
    std::string args, piece;
  };
  for (const Case& c : std::vector<Case>{
           {"info --vocab-size abc x.bin", "--vocab-size: Failed parsing abc"},
           {"info --vocab-size 0 x.bin", "--vocab-size: Value 0 not in range 1 to 65536"},
           {"info --vocab-size 65537 x.bin", "--vocab-size: Value 65537 not in range"},
           {"info --show abc x.bin", "--show: Value abc not in range 0 to 1000000"},
           {"prepare --input x --out o --val-docs abc", "--val-docs: 'abc' is not a whole number"},
           {"prepare --input x --out o --val-docs -1", "--val-docs: '-1' must be >= 0"},
           {"prepare --input x --out o --val-tokens x", "--val-tokens: 'x' is not a whole number"},
           {"prepare --input x --out o --val-tokens -5", "--val-tokens: '-5' must be >= 0"},
           {"prepare --input x --out o --threads 1.5", "--threads: '1.5' is not a whole number"},
           {"prepare --input x --out o --threads -2", "--threads: '-2' must be >= 0"},
           {"prepare --input x --out o --shard-tokens abc", "--shard-tokens = abc"},
           {"eval --checkpoint x.h5 --batches abc", "--batches = abc"},
           {"eval --checkpoint x.h5 --threads 1.5", "--threads = 1.5"},
           {"eval --checkpoint x.h5 --json=maybe", "--json = maybe"},
           {"eval --checkpoint x.h5 --device tpu", "--device: tpu not in {auto,cpu,cuda}"},
           {"train --print-config=maybe", "--print-config = maybe"},
           {"train --config c.yaml --overwrite=maybe", "--overwrite = maybe"},
           {"prepare --input x --out o --overwrite=maybe", "--overwrite = maybe"},
       })
    expect_error(c.args, {c.piece});
}

// ---- tokenize / detokenize ----

using BadTokenize = BadInput;

TEST_F(BadTokenize, InputAndTokenizerPaths) {
  write_file(path("in.txt"), "hello");
  for (const char* cmd : {"tokenize", "detokenize"}) {
    const std::string c = cmd;
    expect_error(c + " --input " + qpath("nope.txt"), {"cannot open --input", "nope.txt", "No such file"});
    expect_error(c + " --input " + quote(dir_.string()), {"--input", "is a directory"});
    expect_error(c + " --input " + qpath("in.txt") + " --tokenizer " + qpath("no_dir"),
                 {"no_dir/encoder.json", "--tokenizer DIR"});
    expect_error(c + " --input " + qpath("in.txt") + " --tokenizer " + qpath("in.txt"),
                 {"in.txt/encoder.json", "Not a directory"});
    // The default tokenizer directory follows DELTATRON_ASSETS.
    expect_error(c + " --input " + qpath("in.txt"), {path("no_assets") + "/gpt2/encoder.json", "DELTATRON_ASSETS"},
                 "/dev/null", "DELTATRON_ASSETS=" + qpath("no_assets"));
  }
  if (::geteuid() != 0) {  // root reads anything
    fs::permissions(path("in.txt"), fs::perms::none);
    expect_error("tokenize --input " + qpath("in.txt"), {"cannot open --input", "in.txt", "Permission denied"});
  }
}

TEST_F(BadTokenize, DetokenizeIdsNameTheTokenAndOffset) {
  write_file(path("ids.txt"), "15496 995 1.5");
  expect_error("detokenize", {"'1.5' (token 2, byte offset 10 of standard input)", "integers in [0, 50257)"},
               path("ids.txt"));
  write_file(path("ids.txt"), "15496\n-7");
  expect_error("detokenize --input " + qpath("ids.txt"), {"'-7' (token 1, byte offset 6 of " + path("ids.txt")});
  write_file(path("ids.txt"), "99999999999999999999");
  expect_error("detokenize --input " + qpath("ids.txt"), {"'99999999999999999999' (token 0"});
}

// ---- the tokenizer files (GPT-2's encoder.json and vocab.bpe; data/tokenizer_load.cpp) ----

using BadTokenizerFiles = BadInput;

TEST_F(BadTokenizerFiles, EveryDefectNamesTheFileAndTheProblem) {
  const std::string assets = std::string(DELTATRON_SOURCE_DIR) + "/assets/gpt2/";
  const std::string enc = read_file(assets + "encoder.json"), bpe = read_file(assets + "vocab.bpe");
  ASSERT_GT(enc.size(), 100000u);
  const std::string last_merge = bpe.substr(bpe.rfind('\n', bpe.size() - 2) + 1);
  struct Case {
    std::string what, encoder, vocab, piece;
  };
  const std::vector<Case> cases = {
      {"truncated encoder.json", enc.substr(0, enc.size() / 2), bpe, "encoder.json' must be a JSON object"},
      {"encoder.json an array", "[1, 2, 3]", bpe, "an array, not an object"},
      {"encoder.json empty object", "{}", bpe, "not an empty one"},
      {"encoder.json a bare number", "7", bpe, "encoder.json' must be a JSON object"},
      {"an entry missing", replace_once(enc, "\"!\": 0, ", ""), bpe, "has 50256 entries; GPT-2's encoder.json has 50257"},
      {"id out of range", replace_once(enc, "\"!\": 0,", "\"!\": 60000,"), bpe, "key \"!\" has id 60000, outside"},
      {"id a string", replace_once(enc, "\"!\": 0,", "\"!\": \"0\","), bpe, "the value of key \"!\" is the string"},
      {"id a fraction", replace_once(enc, "\"!\": 0,", "\"!\": 0.5,"), bpe, "not an integer token id"},
      {"id used twice", replace_once(enc, "\"#\": 2,", "\"#\": 1,"), bpe, "id 1 is used twice"},
      {"key outside the byte alphabet", replace_once(enc, "\"#\": 2,", "\"\u4e2d\": 2,"), bpe, "byte alphabet"},
      {"<|endoftext|> with another id",
       replace_once(replace_once(enc, "\"#\": 2,", "\"#\": 50256,"), "\"<|endoftext|>\": 50256", "\"<|endoftext|>\": 2"),
       bpe, "<|endoftext|> has id 2, expected 50256"},
      {"one-byte tokens out of order", replace_once(replace_once(enc, "\"!\": 0,", "\"!\": 1,"), "\"\\\"\": 1,", "\"\\\"\": 0,"),
       bpe, "id 0 should be the one-byte token for byte 33"},
      {"vocab.bpe empty", enc, "", "vocab.bpe' is empty"},
      {"vocab.bpe without its header", enc, replace_once(bpe, "#version: 0.2", "version 0.2"),
       "line 1 should be the '#version: 0.2' header"},
      {"a merge of three parts", enc, replace_once(bpe, "\n\xC4\xA0 t\n", "\n\xC4\xA0 t x\n"),
       "line 2: expected a merge \"LEFT RIGHT\""},
      {"a merge outside the byte alphabet", enc, replace_once(bpe, "\n\xC4\xA0 t\n", "\n\xE4\xB8\xAD t\n"),
       "line 2: \"\xE4\xB8\xAD t\" is not written in GPT-2's byte alphabet"},
      {"a merge of another vocabulary", enc, replace_once(bpe, "\n\xC4\xA0 t\n", "\n\xC4\xA0 a\n"),
       "line 2: merge \"\xC4\xA0 a\" does not make token 256"},
      {"a merge too few", enc, bpe.substr(0, bpe.size() - last_merge.size()), "has 49999 merges"},
      {"a merge too many", enc, bpe + last_merge, "more merges than the 50000 ids"},
  };
  write_file(path("in.txt"), "hello");
  fs::create_directories(path("tok"));
  for (const Case& c : cases) {
    write_file(path("tok/encoder.json"), c.encoder);
    write_file(path("tok/vocab.bpe"), c.vocab);
    const CliResult r = run("tokenize --input " + qpath("in.txt") + " --tokenizer " + qpath("tok"));
    expect_error(r, {"tokenizer: '" + path("tok/"), c.piece}, c.what);
  }
  fs::remove(path("tok/vocab.bpe"));
  write_file(path("tok/encoder.json"), enc);
  expect_error("tokenize --input " + qpath("in.txt") + " --tokenizer " + qpath("tok"),
               {"cannot open '" + path("tok/vocab.bpe") + "'", "--tokenizer DIR"});
}

// ---- prepare ----

using BadPrepare = BadInput;

std::string jsonl(const std::vector<std::string>& texts) {
  std::string s;
  for (const std::string& t : texts) s += "{\"text\": \"" + t + "\"}\n";
  return s;
}

TEST_F(BadPrepare, FlagsAndPaths) {
  write_file(path("ok.jsonl"), jsonl({"one", "two", "three"}));
  write_file(path("file"), "x");
  const std::string in = " --input " + qpath("ok.jsonl");
  expect_error("prepare" + in + " --out " + qpath("o") + " --shard-tokens 0", {"--shard-tokens 0 is out of range"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --shard-tokens 2147483648",
               {"--shard-tokens 2147483648 is out of range"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --name a/b", {"--name a/b must be a file name prefix"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --val-docs 4",
               {"the input holds 3 documents, fewer than the --val-docs 4", "pass --val-docs 3 or fewer"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --val-tokens 100000",
               {"fewer than the --val-tokens 100000 asked for validation", "pass a smaller --val-tokens"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --val-tokens 5 --val-docs 1",
               {"--val-docs 1 and --val-tokens 5 both choose the validation split; pass one of them"});
  EXPECT_FALSE(fs::exists(path("o/ok_val_000000.bin"))) << "a failed prepare leaves no shards";
  expect_error("prepare --input " + qpath("missing.jsonl") + " --out " + qpath("o"), {"missing.jsonl: no such file"});
  expect_error("prepare --input " + quote(dir_.string()) + " --out " + qpath("o"), {"is a directory"});
  expect_error("prepare --input - --input - --out " + qpath("o"), {"input '-' (standard input) is given 2 times"});
  expect_error("prepare" + in + " --out " + qpath("file"), {"--out " + path("file") + " exists and is not a directory"});
  expect_error("prepare" + in + " --out " + qpath("file/sub"), {"cannot create the output directory", "file/sub"});
  expect_error("prepare" + in + " --out " + qpath("o") + " --tokenizer " + qpath("nowhere"), {"nowhere/encoder.json"});
  // Shards of the same name already there need --overwrite.
  ASSERT_EQ(run("prepare" + in + " --out " + qpath("o") + " --val-docs 1").code, 0);
  expect_error("prepare" + in + " --out " + qpath("o") + " --val-docs 1", {"already holds 2 shard(s) named ok_*.bin",
                                                                           "--overwrite"});
  if (::geteuid() != 0) {
    fs::create_directories(path("ro"));
    fs::permissions(path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_error("prepare" + in + " --out " + qpath("ro"), {"cannot write in the output directory"});
    write_file(path("locked.jsonl"), jsonl({"a", "b"}));
    fs::permissions(path("locked.jsonl"), fs::perms::none);
    expect_error("prepare --input " + qpath("locked.jsonl") + " --out " + qpath("o2"),
                 {"input " + path("locked.jsonl") + ": cannot open"});
  }
  // Each input is checked before the output directory is made.
  expect_error("prepare" + in + " --input " + qpath("missing.jsonl") + " --out " + qpath("later"), {"no such file"});
  EXPECT_FALSE(fs::exists(path("later")));
}

// Each defect of a JSON-lines input names the input and the line; standard input is "<stdin>".
TEST_F(BadPrepare, JsonLinesDefectsNameTheLine) {
  struct Case {
    std::string line, piece;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"text\": \"unterminated}", "line 2: not valid JSON"},
           {"[\"text\"]", "line 2: a JSON array where an object"},
           {"\"text\"", "line 2: a JSON string where an object"},
           {"{\"body\": \"x\"}", "line 2: the object has no \"text\" field"},
           {"{\"text\": 42}", "line 2: the \"text\" field is a number, not a string"},
           {"{\"text\": null}", "line 2: the \"text\" field is a null, not a string"},
           {"{\"text\": \"\xFF\xFE\"}", "line 2: not valid JSON"},
       }) {
    write_file(path("in.jsonl"), jsonl({"fine"}) + c.line + "\n" + jsonl({"fine"}));
    expect_error("prepare --input " + qpath("in.jsonl") + " --out " + qpath("o"), {path("in.jsonl") + ", " + c.piece});
  }
  write_file(path("in.jsonl"), jsonl({"fine", "fine"}) + "{oops}\n");
  expect_error("prepare --input - --out " + qpath("o"), {"input <stdin>, line 3: not valid JSON"}, path("in.jsonl"));
  // No documents, or too few to split.
  write_file(path("blank.jsonl"), "\n \n");
  expect_error("prepare --input " + qpath("blank.jsonl") + " --out " + qpath("o"), {"no documents in the input"});
  write_file(path("empty_texts.jsonl"), jsonl({"", ""}));
  expect_error("prepare --input " + qpath("empty_texts.jsonl") + " --out " + qpath("o"),
               {"no documents in the input (only 2 empty texts)"});
  write_file(path("one.jsonl"), jsonl({"only"}));
  expect_error("prepare --input " + qpath("one.jsonl") + " --out " + qpath("o"), {"the input holds 1 document",
                                                                                   "--val-docs 0"});
}

// ---- info (token shards: data/test_shard.cpp covers every header defect) ----

using BadInfo = BadInput;

// `info DIR`: the prepared sets in a directory, each shard checked against its manifest.
TEST_F(BadInfo, ShardSetDirectories) {
  const std::string sets = path("sets");
  fs::create_directories(sets);
  write_shard(sets + "/s_val_000000.bin", std::vector<uint16_t>{50256, 1, 2});
  write_shard(sets + "/s_train_000001.bin", std::vector<uint16_t>{50256, 3, 4, 5});
  expect_error("info " + quote(sets), {sets + " is a directory holding no shard-set manifest"});
  write_manifest(sets + "/s.manifest.json", manifest_of_files(sets, "s"));
  CliResult r = run("info " + quote(sets));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("set s: 2 shards, 7 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid:      yes"), std::string::npos) << r.out;
  write_shard(sets + "/s_train_000001.bin", std::vector<uint16_t>{50256, 3, 4, 6});  // changed after the manifest
  write_shard(sets + "/s_train_000002.bin", std::vector<uint16_t>{50256, 9});        // listed nowhere
  fs::create_directories(sets + "/.s.prepare.tmp.abc123");                           // a killed prepare
  expect_error("info " + quote(sets), {"3 problem(s)", "s_train_000001.bin fails its SHA-256 check",
                                       "s_train_000002.bin is listed in no manifest",
                                       ".s.prepare.tmp.abc123 is a leftover of an interrupted `deltatron prepare`"});
}

TEST_F(BadInfo, FilesThatAreNeitherShardsNorCheckpoints) {
  write_file(path("empty.bin"), "");
  write_file(path("text.txt"), "hello world, not a shard");
  write_file(path("other.h5"), std::string("\x89HDF\r\n\x1a\n", 8) + std::string(64, '\0'));
  expect_error("info " + qpath("missing.bin"), {path("missing.bin") + ": no such file"});
  expect_error("info " + quote(dir_.string()), {"is a directory"});
  expect_error("info " + qpath("empty.bin"), {path("empty.bin") + " is neither a token shard"});
  expect_error("info " + qpath("text.txt"), {path("text.txt") + " is neither a token shard"});
  expect_error("info " + qpath("other.h5"), {path("other.h5") + " is an HDF5 file but not a Deltatron checkpoint"});
  // A shard whose ids do not fit --vocab-size.
  write_shard(path("s.bin"), std::vector<uint16_t>{7, 299, 300});
  expect_error("info --vocab-size 300 " + qpath("s.bin"), {"token 300 at position 2 is >= vocab_size 300"});
  if (::geteuid() != 0) {
    fs::permissions(path("s.bin"), fs::perms::none);
    expect_error("info " + qpath("s.bin"), {path("s.bin"), "cannot open"});
  }
}

TEST_F(BadInfo, ShowAndTokenizer) {
  write_shard(path("s.bin"), std::vector<uint16_t>{50256, 15496, 995});
  expect_error("info --show -5 " + qpath("s.bin"), {"--show: Value -5 not in range 0 to 1000000"});
  expect_error("info --tokenizer " + qpath("nowhere") + " " + qpath("s.bin"),
               {"--tokenizer: Directory does not exist", path("nowhere")});
}

// ---- train: paths and data (the config keys: test_bad_config.cpp) ----

// Tiny shards (ids < 61) and a config that trains on them in a fraction of a second.
void write_tiny_run(const std::string& dir) {
  std::vector<uint16_t> train(800), val(300);
  for (size_t i = 0; i < train.size(); ++i) train[i] = static_cast<uint16_t>((3 * i + i / 17) % 61);
  for (size_t i = 0; i < val.size(); ++i) val[i] = static_cast<uint16_t>((5 * i + 7) % 61);
  write_shard(dir + "/tiny_train_000001.bin", train);
  write_shard(dir + "/tiny_val_000000.bin", val);
  write_manifest(dir + "/tiny.manifest.json", manifest_of_files(dir, "tiny"));
  Config c = default_config();
  c.model.vocab_size = 64;
  c.model.d_model = 16;
  c.model.d_ff = 16;
  c.model.layers = parse_layer_pattern("[gdn, attn]");
  c.model.attn = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 8, .rotary_dim = 8};
  c.model.gdn = {.n_k_heads = 1, .n_v_heads = 1, .head_k_dim = 8, .head_v_dim = 8, .chunk_size = 8};
  c.data.train = dir + "/tiny_train_*.bin";
  c.data.val = dir + "/tiny_val_*.bin";
  c.train.batch_size = 2;
  c.train.seq_len = 16;
  c.train.steps = 2;
  c.train.warmup_steps = 1;
  c.train.eval_batches = 1;
  c.run.dir = dir + "/runs";
  c.run.threads = 1;
  write_file(dir + "/tiny.yaml", config_to_yaml(c));
}

using BadTrain = BadInput;

TEST_F(BadTrain, ConfigAndRunDirectoryPaths) {
  write_tiny_run(dir_.string());
  write_file(path("file"), "x");
  write_file(path("garbage.yaml"), std::string("\x00\x01\x02\xFF{[", 7));
  const std::string c = "train --config " + qpath("tiny.yaml");
  expect_error("train --config " + qpath("nope.yaml"), {"config file '" + path("nope.yaml") + "' not found"});
  expect_error("train --config " + quote(dir_.string()), {"config file '" + dir_.string() + "' is a directory"});
  expect_error("train --config " + quote(dir_.string()), {"config file '" + dir_.string() + "'"});
  expect_error("train --config " + qpath("garbage.yaml"), {path("garbage.yaml") + ":"});
  expect_error(c + " --run-dir ''", {"--run-dir is empty", "leave the flag out"});
  expect_error(c + " --run-dir " + qpath("file"), {"cannot create the directory '" + path("file") + "'"});
  expect_error(c + " --set run.dir=" + qpath("file"), {"cannot create the directory '" + path("file") + "/tiny'"});
  expect_error(c + " --run-dir " + qpath("r") + " --resume " + quote(dir_.string()),
               {"--resume: checkpoint " + dir_.string() + " is a directory"});
  if (::geteuid() != 0) {
    write_file(path("locked.yaml"), "train:\n  steps: 3\n");
    fs::permissions(path("locked.yaml"), fs::perms::none);
    expect_error("train --config " + qpath("locked.yaml"), {"cannot read the config file", "locked.yaml"});
  }
  // Nothing was written for any of them.
  EXPECT_FALSE(fs::exists(path("runs")));
  EXPECT_FALSE(fs::exists(path("r")));
}

TEST_F(BadTrain, DataThatDoesNotFitTheConfig) {
  write_tiny_run(dir_.string());
  write_file(path("text.txt"), "not a shard");
  const std::string c = "train --config " + qpath("tiny.yaml") + " --run-dir " + qpath("r");
  expect_error(c + " --set data.train=" + qpath("none_*.bin"), {"data.train: no shard files match"});
  expect_error(c + " --set data.val=" + qpath("none_*.bin"), {"data.val: no shard files match"});
  expect_error(c + " --set data.train=" + quote(dir_.string()), {"shard " + dir_.string() + ": is a directory"});
  expect_error(c + " --set data.train=" + qpath("text.txt"), {"shard " + path("text.txt"), "too short for the 1024-byte header"});
  expect_error(c + " --set model.vocab_size=32", {"tiny_train_000001.bin: token", "is >= vocab_size 32"});
  expect_error(c + " --set train.seq_len=900", {"tiny_train_000001.bin: 800 tokens, fewer than one training window"});
  expect_error(c + " --set train.batch_size=100", {"fewer than one global batch"});
  if (cuda_device_count() == 0) expect_error(c + " --device cuda", {"device cuda: "});  // no CUDA build, or no GPU
  expect_error(c + " --device tpu", {"--device: tpu not in {auto,cpu,cuda}"});
  expect_error(c + " --set parallel.tp=2 --set model.vocab_size=64 --set model.attn.n_heads=2 "
                   "--set model.gdn.n_k_heads=2 --set model.gdn.n_v_heads=2",
               {"parallel.tp = 2: tensor parallelism needs the multi-process backend"});
  EXPECT_FALSE(fs::exists(path("r")));
}

// A model far beyond the device's memory (about 20 billion parameters, 340 GB with AdamW) is refused
// before anything is allocated, naming the device's memory and the keys: on the host here, and on
// the GPU where there is one.
TEST_F(BadTrain, AModelBeyondTheDevicesMemoryIsRefused) {
  write_tiny_run(dir_.string());
  const std::string c = "train --config " + qpath("tiny.yaml") + " --run-dir " + qpath("r") +
                        " --set model.d_model=67108864 --set model.d_ff=64";
  expect_error(c + " --device cpu", {"the model does not fit", "but the host has", "lower model.d_model"});
  if (cuda_device_count() > 0)
    expect_error(c + " --device cuda", {"the model does not fit", "but the GPU has", "lower model.d_model"});
  EXPECT_FALSE(fs::exists(path("r")));
}

// Training needs one global batch of training windows and train.eval_batches batches of validation
// windows; a smaller set names the key, the glob, the files and the numbers, before anything is written.
TEST_F(BadTrain, TooSmallDataSetsNameTheKeyAndTheFiles) {
  write_tiny_run(dir_.string());  // windows of 16 + 1 tokens: train 800 tokens = 49, val 300 tokens = 18
  const std::string c = "train --config " + qpath("tiny.yaml") + " --run-dir " + qpath("r");
  const std::string train_glob = path("tiny_train_*.bin"), val_glob = path("tiny_val_*.bin");
  expect_error(c + " --set train.eval_batches=10",
               {"data.val = '" + val_glob + "'", path("tiny_val_000000.bin"), "hold 18 windows",
                "fewer than the 20 that train.eval_batches = 10 batches of train.batch_size x data-parallel ranks = "
                "2 x 1 need",
                "--val-tokens 321", "lower train.eval_batches (to at most 9"});
  expect_error(c + " --set train.batch_size=50 --set train.eval_batches=0",
               {"data.train = '" + train_glob + "'", path("tiny_train_000001.bin"), "hold 49 windows",
                "fewer than one global batch of train.batch_size x data-parallel ranks = 50 x 1 = 50 windows",
                "add training data", "lower train.batch_size or train.seq_len"});
  EXPECT_FALSE(fs::exists(path("r")));
  // Exactly enough validation windows trains.
  EXPECT_EQ(run(c + " --set train.eval_batches=9 --set train.steps=1").code, 0);
}

// ---- checkpoints (trainer/checkpoint_format.*), through `deltatron info` and `deltatron eval` ----

using BadCheckpoint = BadInput;

constexpr size_t kHeaderBytes = 512;  // the user block before HDF5 (trainer/checkpoint_format.cpp)

// After a deliberate edit, writes a header whose whole-file SHA-256 matches again, so the deeper
// checks are reached.
void reseal(const std::string& file) {
  std::string header = "DELTATRON-CHECKPOINT\nsha256 " + sha256_file_hex(file, kHeaderBytes) + "\n";
  header.resize(kHeaderBytes, '\0');
  std::FILE* f = std::fopen(file.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fclose(f);
}

// A valid checkpoint with one tensor params/w = [1, 2, 3, 4, 5, 6] and `config`; `edit` then
// changes the HDF5 file (opened read-write) before it is resealed.
template <class Edit>
std::string make_checkpoint(const std::string& file, const std::string& config, Edit&& edit, int64_t step = 3) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  CheckpointState s;
  s.config_yaml = config;
  s.step = step;
  s.optimizer_steps = step < 0 ? 0 : step;
  checkpoint_save(file, s, {{"params", {{"w", Tensor(w.data(), DType::kF32, Device::kCPU, {2, 3})}}}});
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(f, 0);
  edit(f);
  H5Fclose(f);
  reseal(file);
  return file;
}

void no_edit(hid_t) {}

TEST_F(BadCheckpoint, EveryDefectNamesTheFileAndTheProblem) {
  const std::string cfg = "model:\n  d_model: 8\n";
  const std::string good = make_checkpoint(path("good.h5"), cfg, no_edit);
  // Sound as a file, but its one tensor is not the stored config's model: info refuses it as eval would.
  expect_error("info " + qpath("good.h5"), {"tensor params/model.embed_tokens.weight is missing"});
  const std::string bytes = read_file(good);

  write_file(path("short.h5"), "DELTATRON-CHECKPOINT\nsha256 ");
  expect_error("info " + qpath("short.h5"), {path("short.h5") + " is not a Deltatron checkpoint"});
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  write_file(path("flipped.h5"), flipped);
  expect_error("info " + qpath("flipped.h5"), {path("flipped.h5") + " is corrupted or truncated"});
  write_file(path("cut.h5"), bytes.substr(0, bytes.size() - 64));
  expect_error("info " + qpath("cut.h5"), {path("cut.h5") + " is corrupted or truncated"});
  write_file(path("not_hdf5.h5"), bytes.substr(0, kHeaderBytes) + std::string(2000, 'x'));
  reseal(path("not_hdf5.h5"));
  expect_error("info " + qpath("not_hdf5.h5"), {path("not_hdf5.h5") + " is not a readable HDF5 file"});

  make_checkpoint(path("version.h5"), cfg, [](hid_t f) {
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    int64_t v = 99;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  });
  expect_error("info " + qpath("version.h5"), {"format version 99 is not supported"});
  make_checkpoint(path("no_step.h5"), cfg, [](hid_t f) { H5Adelete(f, "step"); });
  expect_error("info " + qpath("no_step.h5"), {path("no_step.h5") + ": attribute 'step' is missing"});
  make_checkpoint(path("no_config.h5"), cfg, [](hid_t f) { H5Adelete(f, "config"); });
  expect_error("info " + qpath("no_config.h5"), {"attribute 'config' is missing"});
  make_checkpoint(path("float_step.h5"), cfg, [](hid_t f) {
    H5Adelete(f, "step");
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "step", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    double v = 3.5;
    H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
    H5Aclose(a);
    H5Sclose(space);
  });
  expect_error("info " + qpath("float_step.h5"), {"attribute 'step' is not an integer"});
  make_checkpoint(path("negative_step.h5"), cfg, no_edit, -4);
  expect_error("info " + qpath("negative_step.h5"), {"inconsistent attributes (step -4"});
  make_checkpoint(path("no_params.h5"), cfg, [](hid_t f) { H5Ldelete(f, "params", H5P_DEFAULT); });
  expect_error("info " + qpath("no_params.h5"), {"group /params is missing"});
  make_checkpoint(path("f64.h5"), cfg, [](hid_t f) {
    H5Ldelete(f, "params/w", H5P_DEFAULT);
    hsize_t dims[2] = {2, 3};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t ds = H5Dcreate2(f, "params/w", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    double v[6] = {1, 2, 3, 4, 5, 6};
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
    H5Sclose(space);
  });
  expect_error("info " + qpath("f64.h5"), {"tensor params/w is not float32"});
  make_checkpoint(path("tensor_sha.h5"), cfg, [](hid_t f) {
    hid_t ds = H5Dopen2(f, "params/w", H5P_DEFAULT);
    float v[6] = {1, 2, 3, 4, 5, 7};
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
  });
  expect_error("info " + qpath("tensor_sha.h5"), {"tensor params/w fails its SHA-256 check"});
}

// ---- eval (the damaged-checkpoint cases through eval: trainer/test_eval_cli.cpp) ----

using BadEval = BadInput;

TEST_F(BadEval, CheckpointAndDataPaths) {
  write_tiny_run(dir_.string());
  const std::string config = read_file(path("tiny.yaml"));
  // A stored config that breaks a rule: the message names the checkpoint file and the rule.
  make_checkpoint(path("edited.h5"), "model:\n  d_model: -8\n", no_edit);
  expect_error("eval --checkpoint " + qpath("edited.h5"),
               {"checkpoint " + path("edited.h5") + ": its stored config is invalid", "model.d_model = -8 must be > 0", "the checkpoint was written by another version of deltatron, or edited"});
  make_checkpoint(path("unknown_key.h5"), "model:\n  dmodel: 8\n", no_edit);
  expect_error("eval --checkpoint " + qpath("unknown_key.h5"),
               {"the config stored in checkpoint " + path("unknown_key.h5") + ":2: unknown key 'model.dmodel'"});
  expect_error("eval --checkpoint " + quote(dir_.string()), {"checkpoint " + dir_.string() + " is a directory"});
  make_checkpoint(path("ok.h5"), config, no_edit);
  expect_error("eval --checkpoint " + qpath("ok.h5") + " --data " + quote(dir_.string()),
               {"shard " + dir_.string() + ": is a directory"});
  write_file(path("text.txt"), "not a shard");
  expect_error("eval --checkpoint " + qpath("ok.h5") + " --data " + qpath("text.txt"),
               {"shard " + path("text.txt"), "too short for the 1024-byte header"});
  // The checkpoint's own data.val, when it has gone.
  fs::remove(path("tiny_val_000000.bin"));
  expect_error("eval --checkpoint " + qpath("ok.h5"), {"data.val (from the checkpoint's config; pass --data GLOB)",
                                                       "no shard files match"});
}

}  // namespace
}  // namespace dt
