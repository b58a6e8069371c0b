#include "trainer/checkpoint_format.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"

namespace dt {

namespace {

// The first 512 bytes of the file are an HDF5 user block that HDF5 itself skips. We keep in it a
// magic line and the SHA-256 of every byte after it, so a corrupted or truncated file is caught
// before HDF5's parser ever sees it (HDF5 is not hardened against hostile files).
constexpr hsize_t kUserBlock = 512;
constexpr char kHeaderMagic[] = "DELTATRON-CHECKPOINT\n";

// HDF5 prints its own error stack to stderr by default; we report our own messages instead.
void silence_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// RAII for an HDF5 identifier.
class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void write_attr_i64(hid_t obj, const char* name, int64_t v) {
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DT_CHECK(attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &v) >= 0, "checkpoint: cannot write attribute {}", name);
}

void write_attr_str(hid_t obj, const char* name, const std::string& s) {
  H5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), s.empty() ? 1 : s.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string buf = s.empty() ? std::string(1, '\0') : s;
  DT_CHECK(attr.ok() && H5Awrite(attr.get(), type.get(), buf.data()) >= 0, "checkpoint: cannot write attribute {}", name);
}

int64_t read_attr_i64(hid_t obj, const std::string& file, const char* name) {
  DT_CHECK(H5Aexists(obj, name) > 0, "checkpoint {}: attribute '{}' is missing; the file is not a Deltatron "
           "checkpoint or was written by an incompatible version", file, name);
  H5Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  DT_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "checkpoint {}: attribute '{}' is not a scalar", file, name);
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  DT_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, "checkpoint {}: attribute '{}' is not an integer", file, name);
  int64_t v = 0;
  DT_CHECK(H5Aread(attr.get(), H5T_NATIVE_INT64, &v) >= 0, "checkpoint {}: cannot read attribute '{}'", file, name);
  return v;
}

std::string read_attr_str(hid_t obj, const std::string& file, const char* name) {
  DT_CHECK(H5Aexists(obj, name) > 0, "checkpoint {}: attribute '{}' is missing", file, name);
  H5Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  DT_CHECK(H5Tget_class(type.get()) == H5T_STRING && H5Tis_variable_str(type.get()) == 0,
           "checkpoint {}: attribute '{}' is not a fixed-length string", file, name);
  H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  DT_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "checkpoint {}: attribute '{}' is not a scalar", file, name);
  size_t size = H5Tget_size(type.get());
  DT_CHECK(size < (size_t{1} << 30), "checkpoint {}: attribute '{}' is implausibly large", file, name);
  std::string s(size, '\0');
  DT_CHECK(H5Aread(attr.get(), type.get(), s.data()) >= 0, "checkpoint {}: cannot read attribute '{}'", file, name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// Creates every group along "a/b/c" below `root`.
hid_t create_groups(hid_t root, const std::string& path) {
  hid_t cur = H5Gopen2(root, "/", H5P_DEFAULT);
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    hid_t next = H5Lexists(cur, part.c_str(), H5P_DEFAULT) > 0 ? H5Gopen2(cur, part.c_str(), H5P_DEFAULT)
                                                               : H5Gcreate2(cur, part.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(cur);
    DT_CHECK(next >= 0, "checkpoint: cannot create group {}", path);
    cur = next;
    start = end + 1;
  }
  return cur;
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  DT_CHECK(fd >= 0, "checkpoint: cannot open {} to fsync it", path);
  int rc = ::fsync(fd);
  ::close(fd);
  DT_CHECK(rc == 0, "checkpoint: fsync of {} failed", path);
}

void check_host_f32(const NamedTensor& nt) {
  DT_CHECK(nt.tensor.device == Device::kCPU && nt.tensor.dtype == DType::kF32 && nt.tensor.is_contiguous(),
           "checkpoint: tensor {} must be a contiguous host f32 tensor, got {}", nt.name, nt.tensor.str());
  DT_CHECK(!nt.name.empty() && nt.name.find('/') == std::string::npos && nt.name != "." ,
           "checkpoint: bad tensor name '{}'", nt.name);
}

void write_header(const std::string& path) {
  std::string digest = sha256_file_hex(path, kUserBlock);
  std::string header = std::string(kHeaderMagic) + "sha256 " + digest + "\n";
  header.resize(kUserBlock, '\0');
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  DT_CHECK(f != nullptr, "checkpoint: cannot reopen {} to write its header", path);
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  ok = std::fclose(f) == 0 && ok;
  DT_CHECK(ok, "checkpoint: writing the header of {} failed (disk full?)", path);
}

void verify_header(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  DT_CHECK(f != nullptr, "checkpoint {} cannot be opened (permissions?)", path);
  std::string header(kUserBlock, '\0');
  size_t n = std::fread(header.data(), 1, header.size(), f);
  std::fclose(f);
  std::string magic(kHeaderMagic);
  DT_CHECK(n == kUserBlock && header.compare(0, magic.size(), magic) == 0,
           "checkpoint {} is not a Deltatron checkpoint (its header is missing or truncated)", path);
  std::string want = header.substr(magic.size(), 7 + 64);
  // The rest of the block (after the magic line and "sha256 <hex>\n") is zero padding, and nothing else.
  const size_t line_end = magic.size() + 7 + 64;
  DT_CHECK(header[line_end] == '\n' && header.find_first_not_of('\0', line_end + 1) == std::string::npos,
           "checkpoint {} has a damaged header: bytes after its checksum line, which must be zero padding, are not; "
           "the file was edited or corrupted; resume from an earlier checkpoint",
           path);
  std::string got = "sha256 " + sha256_file_hex(path, kUserBlock);
  DT_CHECK(want == got, "checkpoint {} is corrupted or truncated: the SHA-256 of its contents does not match the "
           "one recorded when it was written; resume from an earlier checkpoint", path);
}

H5Handle open_for_read(const std::string& path) {
  silence_hdf5();
  DT_CHECK(std::filesystem::exists(path), "checkpoint {} does not exist", path);
  DT_CHECK(!std::filesystem::is_directory(path), "checkpoint {} is a directory; name a checkpoint file "
           "(<run dir>/checkpoints/step_*.h5)", path);
  verify_header(path);
  htri_t is_h5 = H5Fis_hdf5(path.c_str());
  DT_CHECK(is_h5 > 0, "checkpoint {} is not a readable HDF5 file (truncated or corrupted?)", path);
  H5Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  DT_CHECK(f.ok(), "checkpoint {} cannot be opened as HDF5 (truncated or corrupted?)", path);
  return H5Handle(H5Freopen(f.get()), H5Fclose);
}

std::vector<std::string> list_names(hid_t group) {
  std::vector<std::string> names;
  H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
        static_cast<std::vector<std::string>*>(op)->push_back(name);
        return 0;
      },
      &names);
  return names;
}

Shape dataset_shape(hid_t ds, const std::string& file, const std::string& name) {
  H5Handle space(H5Dget_space(ds), H5Sclose);
  int nd = H5Sget_simple_extent_ndims(space.get());
  DT_CHECK(nd >= 0 && nd <= kMaxDims, "checkpoint {}: tensor {} has rank {}", file, name, nd);
  hsize_t dims[kMaxDims] = {};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::vector<int64_t> d(dims, dims + nd);
  return Shape(d);
}

// Reads dataset `name` in `group` into `out` (host f32 of the right numel); verifies the sha256.
void read_dataset(hid_t group, const std::string& file, const std::string& full, const std::string& name,
                  float* out, int64_t numel) {
  H5Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose);
  DT_CHECK(ds.ok(), "checkpoint {}: cannot open tensor {}", file, full);
  H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  DT_CHECK(H5Tget_class(type.get()) == H5T_FLOAT && H5Tget_size(type.get()) == 4,
           "checkpoint {}: tensor {} is not float32", file, full);
  DT_CHECK(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0,
           "checkpoint {}: tensor {} cannot be read (the file is truncated or corrupted)", file, full);
  std::string want = read_attr_str(ds.get(), file, "sha256");
  std::string got = sha256_hex(out, static_cast<size_t>(numel) * 4);
  DT_CHECK(want == got, "checkpoint {}: tensor {} fails its SHA-256 check (stored {}, computed {}); the file is "
           "corrupted: resume from an earlier checkpoint", file, full, want.substr(0, 12), got.substr(0, 12));
}

// The HDF5 part of a save: every attribute and tensor, flushed.
void write_hdf5(const std::string& tmp, const CheckpointState& state, const std::vector<CheckpointGroup>& groups) {
  H5Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_userblock(fcpl.get(), kUserBlock);
  H5Handle f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
  DT_CHECK(f.ok(), "checkpoint: cannot create {} (is the directory writable?)", tmp);
  hid_t root = f.get();
  write_attr_i64(root, "format_version", kCheckpointFormatVersion);
  write_attr_str(root, "config", state.config_yaml);
  write_attr_i64(root, "step", state.step);
  write_attr_i64(root, "tokens_seen", state.tokens_seen);
  write_attr_i64(root, "loader_epoch", static_cast<int64_t>(state.loader_epoch));
  write_attr_i64(root, "loader_position", static_cast<int64_t>(state.loader_position));
  write_attr_i64(root, "rng_seed", static_cast<int64_t>(state.rng_seed));
  write_attr_i64(root, "rng_offset", static_cast<int64_t>(state.rng_offset));
  write_attr_i64(root, "tp", state.tp);
  write_attr_i64(root, "dp", state.dp);
  write_attr_i64(root, "optimizer_steps", state.optimizer_steps);
  write_attr_i64(root, "skipped_steps", state.skipped_steps);
  write_attr_i64(root, "skips_in_a_row", state.skips_in_a_row);
  for (const CheckpointGroup& g : groups) {
    H5Handle grp(create_groups(root, g.path), H5Gclose);
    for (const NamedTensor& nt : g.tensors) {
      check_host_f32(nt);
      hsize_t dims[kMaxDims];
      for (int i = 0; i < nt.tensor.ndim(); ++i) dims[i] = static_cast<hsize_t>(nt.tensor.size(i));
      H5Handle space(nt.tensor.ndim() ? H5Screate_simple(nt.tensor.ndim(), dims, nullptr) : H5Screate(H5S_SCALAR), H5Sclose);
      H5Handle ds(H5Dcreate2(grp.get(), nt.name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
      DT_CHECK(ds.ok(), "checkpoint: cannot create tensor {}/{} (duplicate name?)", g.path, nt.name);
      DT_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, nt.tensor.data) >= 0,
               "checkpoint: writing {}/{} failed (disk full?)", g.path, nt.name);
      write_attr_str(ds.get(), "sha256", sha256_hex(nt.tensor.data, nt.tensor.bytes()));
    }
  }
  DT_CHECK(H5Fflush(root, H5F_SCOPE_GLOBAL) >= 0, "checkpoint: flushing {} failed (disk full?)", tmp);
}

}  // namespace

void checkpoint_save(const std::string& path, const CheckpointState& state, const std::vector<CheckpointGroup>& groups) {
  silence_hdf5();
  namespace fs = std::filesystem;
  fs::path final_path(path);
  fs::path dir = final_path.parent_path().empty() ? fs::path(".") : final_path.parent_path();
  DT_CHECK(fs::is_directory(dir), "checkpoint: directory {} does not exist", dir.string());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    write_hdf5(tmp, state, groups);
    write_header(tmp);
    fsync_path(tmp, false);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);  // the previous checkpoint at `path` is untouched
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  DT_CHECK(!ec, "checkpoint: renaming {} to {} failed: {}", tmp, path, ec.message());
  fsync_path(dir.string(), true);
}

CheckpointState checkpoint_read_state(const std::string& path) {
  H5Handle f = open_for_read(path);
  hid_t root = f.get();
  int64_t version = read_attr_i64(root, path, "format_version");
  DT_CHECK(version == kCheckpointFormatVersion,
           "checkpoint {}: format version {} is not supported (this build reads version {})", path, version,
           kCheckpointFormatVersion);
  CheckpointState s;
  s.config_yaml = read_attr_str(root, path, "config");
  s.step = read_attr_i64(root, path, "step");
  s.tokens_seen = read_attr_i64(root, path, "tokens_seen");
  const int64_t epoch = read_attr_i64(root, path, "loader_epoch");
  const int64_t position = read_attr_i64(root, path, "loader_position");
  DT_CHECK(epoch >= 0 && position >= 0,
           "checkpoint {}: inconsistent attributes (loader_epoch {}, loader_position {}: both must be >= 0); the file "
           "was edited or corrupted; resume from an earlier checkpoint",
           path, epoch, position);
  s.loader_epoch = static_cast<uint64_t>(epoch);
  s.loader_position = static_cast<uint64_t>(position);
  s.rng_seed = static_cast<uint64_t>(read_attr_i64(root, path, "rng_seed"));
  s.rng_offset = static_cast<uint64_t>(read_attr_i64(root, path, "rng_offset"));
  s.tp = read_attr_i64(root, path, "tp");
  s.dp = read_attr_i64(root, path, "dp");
  auto optional_i64 = [&](const char* name, int64_t fallback) {
    return H5Aexists(root, name) > 0 ? read_attr_i64(root, path, name) : fallback;
  };
  s.optimizer_steps = optional_i64("optimizer_steps", s.step);
  s.skipped_steps = optional_i64("skipped_steps", 0);
  s.skips_in_a_row = optional_i64("skips_in_a_row", 0);
  DT_CHECK(s.step >= 0 && s.tokens_seen >= 0 && s.tp >= 1 && s.dp >= 1 && s.optimizer_steps >= 0 &&
               s.optimizer_steps <= s.step && s.skipped_steps >= 0 && s.skips_in_a_row >= 0 &&
               s.skips_in_a_row <= s.skipped_steps,
           "checkpoint {}: inconsistent attributes (step {}, tokens {}, tp {}, dp {}, optimizer steps {}, skipped "
           "{}, skipped in a row {})",
           path, s.step, s.tokens_seen, s.tp, s.dp, s.optimizer_steps, s.skipped_steps, s.skips_in_a_row);
  return s;
}

bool checkpoint_has_group(const std::string& path, const std::string& group) {
  H5Handle f = open_for_read(path);
  const size_t slash = group.find('/');
  if (slash != std::string::npos && H5Lexists(f.get(), group.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) return false;
  return H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::pair<std::string, Shape>> checkpoint_list(const std::string& path, const std::string& group) {
  H5Handle f = open_for_read(path);
  DT_CHECK(H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) > 0, "checkpoint {}: group /{} is missing", path, group);
  H5Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
  DT_CHECK(g.ok(), "checkpoint {}: /{} is not a group", path, group);
  std::vector<std::pair<std::string, Shape>> out;
  for (const std::string& name : list_names(g.get())) {
    H5Handle ds(H5Dopen2(g.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
    DT_CHECK(ds.ok(), "checkpoint {}: /{}/{} is not a tensor", path, group, name);
    out.emplace_back(name, dataset_shape(ds.get(), path, group + "/" + name));
  }
  return out;
}

void checkpoint_load_group(const std::string& path, const CheckpointGroup& group) {
  H5Handle f = open_for_read(path);
  DT_CHECK(H5Lexists(f.get(), group.path.c_str(), H5P_DEFAULT) > 0, "checkpoint {}: group /{} is missing", path,
           group.path);
  H5Handle g(H5Gopen2(f.get(), group.path.c_str(), H5P_DEFAULT), H5Gclose);
  DT_CHECK(g.ok(), "checkpoint {}: /{} is not a group", path, group.path);
  std::vector<std::string> in_file = list_names(g.get());
  std::vector<std::string> wanted;
  for (const NamedTensor& nt : group.tensors) {
    check_host_f32(nt);
    std::string full = group.path + "/" + nt.name;
    DT_CHECK(H5Lexists(g.get(), nt.name.c_str(), H5P_DEFAULT) > 0,
             "checkpoint {}: tensor {} is missing; the checkpoint was written for a different model config", path, full);
    H5Handle ds(H5Dopen2(g.get(), nt.name.c_str(), H5P_DEFAULT), H5Dclose);
    DT_CHECK(ds.ok(), "checkpoint {}: {} is not a tensor", path, full);
    Shape s = dataset_shape(ds.get(), path, full);
    DT_CHECK(s == nt.tensor.shape, "checkpoint {}: tensor {} has shape {} but the model expects {}; the checkpoint "
             "was written for a different model config", path, full, s.str(), nt.tensor.shape.str());
    read_dataset(g.get(), path, full, nt.name, static_cast<float*>(nt.tensor.data), nt.tensor.numel());
    wanted.push_back(nt.name);
  }
  for (const std::string& name : in_file) {
    bool known = false;
    for (const std::string& w : wanted) known = known || w == name;
    DT_CHECK(known, "checkpoint {}: tensor {}/{} is not part of this model; the checkpoint was written for a "
             "different model config", path, group.path, name);
  }
}

std::string checkpoint_summary(const std::string& path) {
  CheckpointState s = checkpoint_read_state(path);
  std::string out = fmt::format("checkpoint {}\n  format version {}\n  step {}, tokens seen {}\n  optimizer steps {}, "
                                "skipped updates {}\n  loader cursor epoch {} position {}\n  layout tp {} dp {}\n",
                                path, kCheckpointFormatVersion, s.step, s.tokens_seen, s.optimizer_steps,
                                s.skipped_steps, s.loader_epoch, s.loader_position, s.tp, s.dp);
  H5Handle f = open_for_read(path);
  for (const std::string group : {"params", "optimizer/m", "optimizer/v"}) {
    if (group != "params" && (H5Lexists(f.get(), "optimizer", H5P_DEFAULT) <= 0 ||
                              H5Lexists(f.get(), group.c_str(), H5P_DEFAULT) <= 0))
      continue;  // a weights-only file
    auto list = checkpoint_list(path, group);
    H5Handle g(H5Gopen2(f.get(), group.c_str(), H5P_DEFAULT), H5Gclose);
    int64_t numel = 0;
    for (auto& [name, shape] : list) {
      std::vector<float> buf(static_cast<size_t>(shape.numel()));
      read_dataset(g.get(), path, group + "/" + name, name, buf.data(), shape.numel());
      numel += shape.numel();
    }
    out += fmt::format("  /{}: {} tensors, {} values, checksums OK\n", group, list.size(), numel);
  }
  out += "  config:\n";
  size_t start = 0;
  while (start < s.config_yaml.size()) {
    size_t end = s.config_yaml.find('\n', start);
    if (end == std::string::npos) end = s.config_yaml.size();
    out += "    " + s.config_yaml.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace dt
