// The manifest of a prepared shard set: `<out>/<name>.manifest.json`, one per set, written by
// `deltatron prepare` after every shard and renamed into place last (data/shard_set.h), so a set
// with a manifest is complete. It lists each shard (file name, tokens, SHA-256), the tokenizer
// (SHA-256 of encoder.json and vocab.bpe) and the inputs.
//
// The loader's rule (check_shard_sets), for a glob (a pattern with *, ? or [; one file named by
// itself is not checked) and each directory that holds shards it matched:
//  - the directory holds one or more manifests: every matched shard must be listed in one of them,
//    with its size (header + 2 bytes a token); shards listed nowhere are refused;
//  - it holds no manifest but `.tmp` leftovers of a prepare (a killed run, or one that died
//    swapping the set in): refused, whatever data.require_manifest says;
//  - it holds no manifest and no leftovers (shards from elsewhere, e.g. llm.c's): the glob loads
//    only with data.require_manifest: false.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dt {

struct ManifestShard {
  std::string file;    // name inside the manifest's directory
  int64_t tokens = 0;
  std::string sha256;  // of the whole file
};

struct ShardManifest {
  std::string name;                  // the set's name (file prefix)
  std::vector<ManifestShard> shards;  // validation first
  std::string encoder_sha256;        // the tokenizer's files; empty when unknown
  std::string vocab_sha256;
  std::vector<std::string> inputs;   // the input paths as given
};

// "<name>.manifest.json".
std::string manifest_file_name(const std::string& name);

// The manifest of the shards <name>_val_*.bin / <name>_train_*.bin now in `dir` (hashing each),
// for sets written by other means than prepare; no tokenizer, no inputs.
ShardManifest manifest_of_files(const std::string& dir, const std::string& name);

// Writes `m` to `path` atomically: `path`.tmp, fsync, rename, fsync of the directory.
void write_manifest(const std::string& path, const ShardManifest& m);

// Reads and checks the form of a manifest; errors name the file and the field.
ShardManifest read_manifest(const std::string& path);

// The manifests in `dir` (*.manifest.json), sorted paths.
std::vector<std::string> manifests_in(const std::string& dir);

// Everything wrong with the set of manifest `path`: a listed shard missing, of the wrong size or
// (with `hashes`) of another SHA-256. Empty: the set is intact.
std::vector<std::string> check_manifest_set(const std::string& path, bool hashes);

// The loader's rule (above) for the shards `paths` that `pattern` matched; `key` names the setting
// in errors. Throws dt::Error naming the shard, the directory and the fix.
void check_shard_sets(const std::string& pattern, const std::vector<std::string>& paths, bool require_manifest,
                      const std::string& key);

}  // namespace dt
