// io/safetensors: what the writer lays down byte by byte, the reader's round trip on odd shapes and
// dtypes, and the reader's refusal of damaged files (a clear dt::Error naming the problem).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "tests/trainer/trainer_test_util.h"

namespace dt {
namespace {

using trainer_testing::ScratchDir;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A file made of a header text and `data_bytes` zero bytes of data.
std::string raw_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

void expect_error(const std::string& path, const std::string& piece) {
  try {
    read_safetensors(path);
    ADD_FAILURE() << "expected an error containing '" << piece << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "the message names the file: " << e.what();
  }
}

TEST(Safetensors, LayoutIsLengthHeaderData) {
  ScratchDir dir;
  const float w[3] = {1.0f, -2.5f, 3.25f};
  const std::string path = dir / "a.safetensors";
  write_safetensors(path, {{"w", DType::kF32, {3}, w}}, {{"format", "pt"}});
  const std::string b = bytes_of(path);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
  ASSERT_EQ(b.size(), 8 + len + sizeof(w));
  EXPECT_EQ(len % 8, 0u) << "the header is padded to a multiple of 8 bytes";
  const std::string header = b.substr(8, len);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find_last_of('}') + 1) << "only spaces pad the header";
  const nlohmann::json h = nlohmann::json::parse(header);
  EXPECT_EQ(h["__metadata__"], (nlohmann::json{{"format", "pt"}}));
  EXPECT_EQ(h["w"]["dtype"], "F32");
  EXPECT_EQ(h["w"]["shape"], nlohmann::json::array({3}));
  EXPECT_EQ(h["w"]["data_offsets"], nlohmann::json::array({0, 12}));
  EXPECT_EQ(std::memcmp(b.data() + 8 + len, w, sizeof(w)), 0) << "raw little-endian floats after the header";
}

TEST(Safetensors, OddShapesAndDtypesRoundTrip) {
  ScratchDir dir;
  const float scalar = 7.0f;
  std::vector<uint16_t> odd(3 * 5 * 7);  // an odd number of 2-byte elements: the next tensor is not 4-aligned
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = static_cast<uint16_t>(i * 2654435761u);
  std::vector<double> ones(1, 1.0);
  std::vector<int32_t> ints = {-1, 0, 2147483647};
  std::vector<uint16_t> u16 = {0, 65535};
  const std::vector<SafetensorsEntry> entries = {
      {"scalar", DType::kF32, {}, &scalar},
      {"odd.bf16", DType::kBF16, {3, 5, 7}, odd.data()},
      {"empty", DType::kF32, {0, 4}, nullptr},
      {"unit", DType::kF64, {1, 1, 1, 1, 1}, ones.data()},
      {"ints", DType::kI32, {3}, ints.data()},
      {"u16", DType::kU16, {2, 1}, u16.data()},
  };
  const std::string path = dir / "odd.safetensors";
  write_safetensors(path, entries, {});  // empty metadata: no __metadata__ key
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_TRUE(f.metadata.empty());
  EXPECT_EQ(f.header.find("__metadata__"), std::string::npos);
  ASSERT_EQ(f.tensors.size(), entries.size());
  std::vector<std::string> names;
  for (const SafetensorsEntry& e : entries) {
    names.push_back(e.name);
    const SafetensorsTensor& t = f.tensors.at(e.name);
    EXPECT_EQ(t.dtype, e.dtype) << e.name;
    EXPECT_EQ(t.shape, e.shape) << e.name;
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    ASSERT_EQ(t.bytes.size(), static_cast<size_t>(n) * dtype_size(e.dtype)) << e.name;
    if (n > 0) {
      EXPECT_EQ(std::memcmp(t.bytes.data(), e.data, t.bytes.size()), 0) << e.name;
    }
  }
  // "empty" (0 bytes) and the tensor after it share an offset; the data order is the writing order.
  EXPECT_EQ(f.names.size(), names.size());
  EXPECT_EQ(f.tensors.at("empty").begin, f.tensors.at("empty").end);
}

TEST(Safetensors, MetadataRoundTripsAndWriterRefusesBadNames) {
  ScratchDir dir;
  const float x = 1;
  write_safetensors(dir / "m.safetensors", {{"x", DType::kF32, {1}, &x}}, {{"format", "pt"}, {"note", "a \"quote\""}});
  const SafetensorsFile f = read_safetensors(dir / "m.safetensors");
  EXPECT_EQ(f.metadata.at("note"), "a \"quote\"");
  EXPECT_THROW(write_safetensors(dir / "d.safetensors", {{"x", DType::kF32, {1}, &x}, {"x", DType::kF32, {1}, &x}}, {}),
               Error);
  EXPECT_THROW(write_safetensors(dir / "d.safetensors", {{"__metadata__", DType::kF32, {1}, &x}}, {}), Error);
  EXPECT_THROW(write_safetensors(dir / "d.safetensors", {{"", DType::kF32, {1}, &x}}, {}), Error);
  EXPECT_THROW(write_safetensors(dir / "d.safetensors", {{"n", DType::kF32, {-1}, &x}}, {}), Error);
  EXPECT_THROW(write_safetensors(dir / "no_dir/x.safetensors", {{"x", DType::kF32, {1}, &x}}, {}), Error);
}

TEST(Safetensors, ReaderRefusesDamagedFiles) {
  ScratchDir dir;
  const std::string p = dir / "bad.safetensors";
  put_bytes(p, "abc");
  expect_error(p, "too short");
  put_bytes(p, raw_file("{}", 0).substr(0, 8));  // length 2 but no header bytes
  expect_error(p, "does not fit");
  put_bytes(p, std::string(8, '\xff'));
  expect_error(p, "does not fit");
  put_bytes(p, raw_file("[1, 2]  ", 0));
  expect_error(p, "not a JSON object");
  put_bytes(p, raw_file("{not json", 0));
  expect_error(p, "not a JSON object");
  put_bytes(p, raw_file(R"({"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", 1));
  expect_error(p, "dtype 'F8'");
  put_bytes(p, raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4));
  expect_error(p, "do not hold 2 elements");
  put_bytes(p, raw_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8));
  expect_error(p, "not a size");
  put_bytes(p, raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4));
  expect_error(p, "data_offsets");
  put_bytes(p, raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  expect_error(p, "a gap or an overlap");
  put_bytes(p, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  expect_error(p, "a gap or an overlap");
  put_bytes(p, raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12));
  expect_error(p, "trailing");
  put_bytes(p, raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4));
  expect_error(p, "truncated");
  put_bytes(p, raw_file(R"({"__metadata__":{"n":1}})", 0));
  expect_error(p, "not a string");
  EXPECT_THROW(read_safetensors(dir / "missing.safetensors"), Error);
}

}  // namespace
}  // namespace dt
