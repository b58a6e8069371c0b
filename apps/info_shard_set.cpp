#include "apps/info_shard_set.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <vector>

#include "core/error.h"
#include "data/manifest.h"
#include "data/shard_set.h"

namespace dt {

namespace fs = std::filesystem;

void info_shard_dir(const std::string& dir) {
  std::vector<std::string> problems;
  std::set<std::string> listed;
  const std::vector<std::string> manifests = manifests_in(dir);
  if (manifests.empty()) {
    const std::vector<std::string> leftovers = shard_set_leftovers(dir);
    DT_FAIL("{} is a directory holding no shard-set manifest (<name>.manifest.json, written by `deltatron prepare`)"
            "{}; `deltatron info` reads a token shard (.bin), a checkpoint, a YAML config or a directory of prepared "
            "shard sets",
            dir,
            leftovers.empty() ? std::string()
                              : fmt::format(" but {} leftover(s) of an interrupted prepare, e.g. {}: run the prepare "
                                            "again (with --overwrite)",
                                            leftovers.size(), leftovers.front()));
  }
  std::printf("directory:  %s\n", dir.c_str());
  std::printf("sets:       %zu (one <name>.manifest.json each)\n", manifests.size());
  for (const std::string& path : manifests) {
    ShardManifest m;
    try {
      m = read_manifest(path);
    } catch (const Error& e) {
      problems.push_back(e.what());
      continue;
    }
    int64_t tokens = 0;
    for (const ManifestShard& s : m.shards) {
      tokens += s.tokens;
      listed.insert(s.file);
    }
    std::printf("set %s: %zu shards, %lld tokens\n", m.name.c_str(), m.shards.size(), static_cast<long long>(tokens));
    for (const ManifestShard& s : m.shards)
      std::printf("  %-28s %12lld tokens  sha256 %s\n", s.file.c_str(), static_cast<long long>(s.tokens),
                  s.sha256.c_str());
    std::printf("  tokenizer: encoder.json %s, vocab.bpe %s\n",
                m.encoder_sha256.empty() ? "(unknown)" : m.encoder_sha256.c_str(),
                m.vocab_sha256.empty() ? "(unknown)" : m.vocab_sha256.c_str());
    for (const std::string& in : m.inputs) std::printf("  input: %s\n", in.c_str());
    for (std::string& p : check_manifest_set(path, /*hashes=*/true)) problems.push_back(std::move(p));
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string f = entry.path().filename().string();
    if (f.ends_with(".bin") && !listed.count(f))
      problems.push_back(fmt::format("{} is listed in no manifest: not part of a complete prepared set",
                                     entry.path().string()));
  }
  for (const std::string& p : shard_set_leftovers(dir))
    problems.push_back(fmt::format("{} is a leftover of an interrupted `deltatron prepare`; the next prepare of that "
                                   "name deletes it, or delete it by hand",
                                   p));
  if (problems.empty()) {
    std::printf("valid:      yes\n");
    return;
  }
  std::string all;
  for (const std::string& p : problems) all += "\n  " + p;
  DT_FAIL("{}: {} problem(s):{}", dir, problems.size(), all);
}

}  // namespace dt
