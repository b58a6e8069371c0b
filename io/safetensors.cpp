#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dt {

namespace {

// Headers larger than this are refused when read (the reference readers use the same bound).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF64, DType::kI32, DType::kU16};

DType dtype_from_name(const std::string& path, const std::string& tensor, const std::string& name) {
  for (DType t : kDtypes)
    if (name == safetensors_dtype_name(t)) return t;
  DT_FAIL("{}: tensor '{}' has dtype '{}', which this reader does not know (F32, BF16, F64, I32, U16)", path, tensor,
          name);
}

// numel of a shape, or -1 when a size is negative or the product overflows.
int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    DT_CHECK(w > 0, "{}: write failed: {}", path, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
    case DType::kI32: return "I32";
    case DType::kU16: return "U16";
    case DType::kF8E4M3: return "F8_E4M3";
  }
  return "?";
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    DT_CHECK(!t.name.empty() && t.name != "__metadata__", "{}: a tensor may not be named '{}'", path, t.name);
    DT_CHECK(seen.insert(t.name).second, "{}: tensor '{}' is given twice", path, t.name);
    const int64_t n = numel_of(t.shape);
    DT_CHECK(n >= 0, "{}: tensor '{}' has a negative or too large shape", path, t.name);
    const uint64_t bytes = static_cast<uint64_t>(n) * dtype_size(t.dtype);
    DT_CHECK(bytes == 0 || t.data, "{}: tensor '{}' has no data", path, t.name);
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  unsigned char len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<unsigned char>(len >> (8 * i));

  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DT_CHECK(fd >= 0, "{}: cannot create: {}", path, std::strerror(errno));
  try {
    write_all(fd, len_le, 8, path);
    write_all(fd, text.data(), text.size(), path);
    for (const SafetensorsEntry& t : tensors)
      write_all(fd, t.data, static_cast<size_t>(numel_of(t.shape)) * dtype_size(t.dtype), path);
    DT_CHECK(::fsync(fd) == 0, "{}: fsync failed: {}", path, std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  DT_CHECK(::close(fd) == 0, "{}: close failed: {}", path, std::strerror(errno));
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DT_CHECK(!in.bad(), "{}: cannot read: {}", path, std::strerror(errno));
  return parse_safetensors(bytes, path);
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  const uint64_t size = bytes.size();
  DT_CHECK(size >= 8, "{}: {} bytes is too short for a safetensors file (8-byte header length first)", path, size);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  DT_CHECK(len <= size - 8 && len <= kMaxHeaderBytes,
           "{}: header length {} does not fit the file ({} bytes) or exceeds {} bytes; is this a safetensors file?",
           path, len, size, kMaxHeaderBytes);
  SafetensorsFile f;
  f.header_bytes = len;
  f.header = std::string(bytes.substr(8, len));
  const nlohmann::json h = nlohmann::json::parse(f.header, nullptr, /*allow_exceptions=*/false);
  DT_CHECK(h.is_object(), "{}: the header is not a JSON object", path);

  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      DT_CHECK(v.is_object(), "{}: __metadata__ is not an object of strings", path);
      for (const auto& [k, s] : v.items()) {
        DT_CHECK(s.is_string(), "{}: __metadata__ value of '{}' is not a string", path, k);
        f.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    DT_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
             "{}: tensor '{}' needs dtype, shape and data_offsets", path, name);
    DT_CHECK(v["dtype"].is_string(), "{}: tensor '{}': dtype is not a string", path, name);
    SafetensorsTensor t;
    t.dtype = dtype_from_name(path, name, v["dtype"].get<std::string>());
    DT_CHECK(v["shape"].is_array(), "{}: tensor '{}': shape is not an array", path, name);
    for (const auto& d : v["shape"]) {
      DT_CHECK(d.is_number_unsigned(), "{}: tensor '{}': shape {} holds a value that is not a size", path, name,
               v["shape"].dump());
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& off = v["data_offsets"];
    DT_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
             "{}: tensor '{}': data_offsets must be [begin, end]", path, name);
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    const int64_t n = numel_of(t.shape);
    DT_CHECK(n >= 0 && static_cast<uint64_t>(n) <= std::numeric_limits<uint64_t>::max() / 8,
             "{}: tensor '{}': shape {} is too large", path, name, v["shape"].dump());
    DT_CHECK(b <= e && e - b == static_cast<uint64_t>(n) * dtype_size(t.dtype),
             "{}: tensor '{}': data_offsets [{}, {}] do not hold {} elements of {}", path, name, b, e, n,
             v["dtype"].get<std::string>());
    t.begin = static_cast<int64_t>(b);
    t.end = static_cast<int64_t>(e);
    ranges.push_back({b, e, name});
    f.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_bytes = size - 8 - len;
  uint64_t at = 0;
  for (const Range& r : ranges) {
    DT_CHECK(r.begin == at, "{}: tensor '{}' starts at byte {} of the data, expected {} (a gap or an overlap)", path,
             r.name, r.begin, at);
    at = r.end;
    f.names.push_back(r.name);
  }
  DT_CHECK(at == data_bytes, "{}: the tensors cover {} bytes but the file holds {} bytes of data (truncated or "
           "trailing bytes)", path, at, data_bytes);
  for (const std::string& name : f.names) {
    SafetensorsTensor& t = f.tensors.at(name);
    const char* at_data = bytes.data() + 8 + len + t.begin;
    t.bytes.assign(at_data, at_data + (t.end - t.begin));
  }
  return f;
}

}  // namespace dt
