#include "data/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/sha256.h"
#include "data/shard.h"
#include "data/shard_set.h"

namespace dt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "deltatron-shard-set";
constexpr int kVersion = 1;

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string manifest_file_name(const std::string& name) { return name + ".manifest.json"; }

void write_manifest(const std::string& path, const ShardManifest& m) {
  json shards = json::array();
  for (const ManifestShard& s : m.shards) shards.push_back({{"file", s.file}, {"tokens", s.tokens}, {"sha256", s.sha256}});
  const json j = {{"format", kFormat},
                  {"version", kVersion},
                  {"name", m.name},
                  {"shards", shards},
                  {"tokenizer", {{"encoder.json_sha256", m.encoder_sha256}, {"vocab.bpe_sha256", m.vocab_sha256}}},
                  {"inputs", m.inputs}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    out.flush();
    DT_CHECK(out.good(), "cannot write {}: {}; check the disk space and permissions of its directory", tmp,
             std::strerror(errno));
  }
  fsync_path(tmp, O_RDONLY);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  DT_CHECK(!ec, "cannot rename {} to {}: {}", tmp, path, ec.message());
  fsync_path(fs::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
}

ShardManifest manifest_of_files(const std::string& dir, const std::string& name) {
  ShardManifest m;
  m.name = name;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (is_set_shard(entry.path().filename().string(), name)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    const bool va = a.find("_val_") != std::string::npos, vb = b.find("_val_") != std::string::npos;
    return va != vb ? va : a < b;  // validation first
  });
  for (const std::string& f : files) {
    const std::string p = (fs::path(dir) / f).string();
    m.shards.push_back({f, static_cast<int64_t>((fs::file_size(p) - kShardHeaderBytes) / 2), sha256_file_hex(p)});
  }
  return m;
}

ShardManifest read_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in.good(), "cannot read the shard-set manifest {}: {}", path, std::strerror(errno));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    DT_FAIL("shard-set manifest {} is not valid JSON ({}); delete the set and run `deltatron prepare` again", path,
            e.what());
  }
  try {
    DT_CHECK(j.is_object() && j.value("format", "") == kFormat,
             "{} is not a Deltatron shard-set manifest (no \"format\": \"{}\")", path, kFormat);
    DT_CHECK(j.at("version").get<int>() == kVersion, "shard-set manifest {} has version {}; this build reads {}",
             path, j.at("version").dump(), kVersion);
    ShardManifest m;
    m.name = j.at("name").get<std::string>();
    for (const json& s : j.at("shards"))
      m.shards.push_back({s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(),
                          s.at("sha256").get<std::string>()});
    m.encoder_sha256 = j.at("tokenizer").value("encoder.json_sha256", "");
    m.vocab_sha256 = j.at("tokenizer").value("vocab.bpe_sha256", "");
    m.inputs = j.value("inputs", std::vector<std::string>{});
    return m;
  } catch (const json::exception& e) {
    DT_FAIL("shard-set manifest {} lacks a field or has one of the wrong type ({}); run `deltatron prepare` again",
            path, e.what());
  }
}

std::vector<std::string> manifests_in(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().ends_with(".manifest.json")) found.push_back(entry.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> check_manifest_set(const std::string& path, bool hashes) {
  const ShardManifest m = read_manifest(path);
  const fs::path dir = fs::path(path).parent_path();
  std::vector<std::string> problems;
  for (const ManifestShard& s : m.shards) {
    const fs::path p = dir / s.file;
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    const uint64_t want = kShardHeaderBytes + 2 * static_cast<uint64_t>(s.tokens);
    if (ec) {
      problems.push_back(fmt::format("{} is listed but missing ({})", p.string(), ec.message()));
    } else if (size != want) {
      problems.push_back(fmt::format("{} has {} bytes, but the manifest's {} tokens make {}", p.string(), size,
                                     s.tokens, want));
    } else if (hashes && sha256_file_hex(p.string()) != s.sha256) {
      problems.push_back(fmt::format("{} fails its SHA-256 check (the file changed after prepare)", p.string()));
    }
  }
  return problems;
}

void check_shard_sets(const std::string& pattern, const std::vector<std::string>& paths, bool require_manifest,
                      const std::string& key) {
  if (pattern.find_first_of("*?[") == std::string::npos) return;  // one file, named on purpose
  std::map<std::string, std::vector<std::string>> by_dir;
  for (const std::string& p : paths) {
    const std::string dir = fs::path(p).parent_path().string();
    by_dir[dir.empty() ? "." : dir].push_back(p);
  }
  for (const auto& [dir, files] : by_dir) {
    const std::vector<std::string> manifests = manifests_in(dir);
    if (manifests.empty()) {
      const std::vector<std::string> leftovers = shard_set_leftovers(dir);
      DT_CHECK(leftovers.empty(),
               "{} = '{}': {} holds no shard-set manifest but leftovers of an interrupted `deltatron prepare` ({}): "
               "its shards may be a partial set; run the prepare again (with --overwrite)",
               key, pattern, dir, leftovers.front());
      DT_CHECK(!require_manifest,
               "{} = '{}': {} holds no shard-set manifest (<name>.manifest.json, written by `deltatron prepare`), so "
               "nothing shows that the {} shard(s) it matches are a complete set; prepare them again, name one file, "
               "or set data.require_manifest: false to load shards made elsewhere (e.g. llm.c's)",
               key, pattern, dir, files.size());
      continue;
    }
    std::map<std::string, uint64_t> listed;  // file name -> expected size
    for (const std::string& mp : manifests)
      for (const ManifestShard& s : read_manifest(mp).shards)
        listed[s.file] = kShardHeaderBytes + 2 * static_cast<uint64_t>(s.tokens);
    for (const std::string& f : files) {
      const std::string name = fs::path(f).filename().string();
      auto it = listed.find(name);
      DT_CHECK(it != listed.end(),
               "{} = '{}': {} is not listed in the shard-set manifest(s) of {} ({}): it is not part of a complete "
               "prepared set; delete it, or run `deltatron prepare` again",
               key, pattern, f, dir, fs::path(manifests.front()).filename().string());
      std::error_code ec;
      const auto size = fs::file_size(f, ec);
      DT_CHECK(!ec && size == it->second,
               "{} = '{}': {} has {} bytes, but its manifest in {} says {}: the file changed after prepare; run "
               "`deltatron prepare` again",
               key, pattern, f, ec ? 0 : size, dir, it->second);
    }
  }
}

}  // namespace dt
