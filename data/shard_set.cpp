#include "data/shard_set.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace dt {

namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& out_dir, const std::string& name, const char* kind) {
  std::string path = (fs::path(out_dir) / fmt::format(".{}.{}.tmp.XXXXXX", name, kind)).string();
  DT_CHECK(::mkdtemp(path.data()) != nullptr, "cannot create a temporary directory in {}: {}; check --out",
           out_dir, std::strerror(errno));
  return path;
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string make_staging_dir(const std::string& out_dir, const std::string& name) {
  return temp_dir(out_dir, name, "prepare");
}

bool is_set_shard(const std::string& f, const std::string& name) {
  return (f.starts_with(name + "_val_") || f.starts_with(name + "_train_")) && f.ends_with(".bin");
}

std::vector<std::string> shard_set_leftovers(const std::string& out_dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string f = entry.path().filename().string();
    const bool temp_set = f.starts_with(".") && (f.find(".prepare.tmp.") != std::string::npos ||
                                                 f.find(".old.tmp.") != std::string::npos);
    if (temp_set || f.ends_with(".tmp")) found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void remove_leftovers(const std::string& out_dir, const std::string& name) {
  for (const std::string& p : shard_set_leftovers(out_dir)) {
    const std::string f = fs::path(p).filename().string();
    if (f.starts_with("." + name + ".prepare.tmp.") || f.starts_with("." + name + ".old.tmp.") ||
        f == name + ".manifest.json.tmp") {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  }
}

void swap_in_shard_set(const std::string& out_dir, const std::string& name, const std::string& staging,
                       const std::vector<std::string>& files) {
  const std::string old = temp_dir(out_dir, name, "old");
  // The old manifest goes first, so that between here and the new manifest's rename the directory
  // holds no manifest and a `.tmp` directory: the loader refuses it rather than mixing sets.
  std::vector<fs::path> old_files;
  const std::string manifest = name + ".manifest.json";
  if (fs::exists(fs::path(out_dir) / manifest)) old_files.push_back(fs::path(out_dir) / manifest);
  for (const auto& entry : fs::directory_iterator(out_dir))
    if (is_set_shard(entry.path().filename().string(), name)) old_files.push_back(entry.path());
  for (const fs::path& p : old_files) fs::rename(p, fs::path(old) / p.filename());
  for (const std::string& f : files) fs::rename(fs::path(staging) / f, fs::path(out_dir) / f);
  sync_dir(out_dir);
  std::error_code ec;
  fs::remove_all(old, ec);
  fs::remove_all(staging, ec);
}

}  // namespace dt
