// safetensors files (docs/export.md says the format in full): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then the raw bytes.
//
//   std::vector<SafetensorsEntry> entries = {{"w", DType::kF32, {2, 3}, data}};
//   write_safetensors("model.safetensors", entries, {{"format", "pt"}});
//   SafetensorsFile f = read_safetensors("model.safetensors");  // validated in full
//
// The writer lays the tensors out in the order given, the header padded with spaces to a multiple
// of 8 bytes (so every tensor starts 8-aligned when the sizes before it are). The reader checks
// everything a consumer relies on and names the file and the tensor at fault.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace dt {

// The format's name of a dtype ("F32", "BF16", "F64", "I32", "U16").
const char* safetensors_dtype_name(DType t);

// One tensor to write: row-major, little-endian bytes at `data` (numel * dtype_size bytes; a shape
// of {} is a scalar, one element).
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// Writes (and fsyncs) `path`; `metadata` becomes the header's "__metadata__" (left out when empty).
// Names must be non-empty, distinct and not "__metadata__".
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata);

struct SafetensorsTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t begin = 0, end = 0;  // data_offsets: the byte range after the header
};

struct SafetensorsFile {
  uint64_t header_bytes = 0;                      // the JSON header's length, padding included
  std::string header;                             // the JSON header as stored
  std::map<std::string, std::string> metadata;    // "__metadata__" (empty when absent)
  std::vector<std::string> names;                 // in the order of their data
  std::map<std::string, SafetensorsTensor> tensors;
};

// Reads and validates a whole file: header length within the file, JSON object, known dtypes,
// shapes of non-negative sizes, byte ranges that match dtype x shape and cover the data exactly
// (no gap, no overlap, nothing after the last).
SafetensorsFile read_safetensors(const std::string& path);
// The same checks on a whole file already in memory; `path` names it in errors.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);

}  // namespace dt
