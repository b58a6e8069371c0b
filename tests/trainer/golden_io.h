// Golden files (tests/golden/*.h5, written by scripts/make_golden.py; README.md there says what
// each holds): a small reader over the HDF5 C API, and the comparisons the golden tests share.
//
//   GoldenFile f(golden_path("qwen35_model.h5"));
//   nlohmann::json hf = nlohmann::json::parse(f.attr_string("config_json"));
//   std::vector<double> logits = f.read<double>("logits");
//   ErrorTable errors("qwen35_model");
//   errors.add("logits", rel_error(ours, logits), 1e-5);
//   errors.check();  // prints every row, fails the test for each one above its tolerance
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "core/context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/fill.h"
#include "layers/model_config.h"
#include "layers/params.h"

namespace dt::golden {

inline std::string golden_path(const std::string& file) {
  return std::string(DELTATRON_TEST_DATA_DIR) + "/golden/" + file;
}

// One HDF5 handle, closed with the function that matches its kind.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class GoldenFile {
 public:
  explicit GoldenFile(std::string path) : path_(std::move(path)) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // failures become dt::Errors, not stderr noise
    file_ = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    DT_CHECK(file_ >= 0, "golden: cannot open {}; regenerate it with python3 scripts/make_golden.py --out tests/golden",
             path_);
  }
  ~GoldenFile() {
    if (file_ >= 0) H5Fclose(file_);
  }
  GoldenFile(const GoldenFile&) = delete;
  GoldenFile& operator=(const GoldenFile&) = delete;

  const std::string& path() const { return path_; }

  // A dataset or group at `name` ("logits", "grads/model.norm.weight"; names may hold dots).
  bool has(const std::string& name) const {
    size_t slash = name.find('/');
    if (slash != std::string::npos && H5Lexists(file_, name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) return false;
    return H5Lexists(file_, name.c_str(), H5P_DEFAULT) > 0;
  }

  std::vector<int64_t> shape(const std::string& name) const {
    Handle ds = open(name);
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    int nd = H5Sget_simple_extent_ndims(space.get());
    DT_CHECK(nd >= 0, "golden: {}: cannot read the shape of '{}'", path_, name);
    std::vector<hsize_t> dims(nd);
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return {dims.begin(), dims.end()};  // empty for a scalar
  }

  // The whole dataset, converted by HDF5 to T (float, double or int32_t). A float dataset is never
  // read as integers or the other way round.
  template <class T>
  std::vector<T> read(const std::string& name) const {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>);
    Handle ds = open(name);
    Handle ftype(H5Dget_type(ds.get()), H5Tclose);
    H5T_class_t want = std::is_same_v<T, int32_t> ? H5T_INTEGER : H5T_FLOAT;
    DT_CHECK(H5Tget_class(ftype.get()) == want, "golden: {}: dataset '{}' is not of {} type", path_, name,
             want == H5T_FLOAT ? "a floating-point" : "an integer");
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    hssize_t n = H5Sget_simple_extent_npoints(space.get());
    DT_CHECK(n >= 0, "golden: {}: cannot size '{}'", path_, name);
    std::vector<T> out(static_cast<size_t>(n));
    hid_t mtype = std::is_same_v<T, float>    ? H5T_NATIVE_FLOAT
                  : std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE
                                              : H5T_NATIVE_INT32;
    DT_CHECK(H5Dread(ds.get(), mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
             "golden: {}: cannot read '{}'", path_, name);
    return out;
  }

  // Names of the members of a group, in name order.
  std::vector<std::string> names(const std::string& group) const {
    DT_CHECK(has(group), "golden: {}: no group '{}'", path_, group);
    std::vector<std::string> out;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
      static_cast<std::vector<std::string>*>(op)->emplace_back(name);
      return 0;
    };
    Handle g(H5Gopen2(file_, group.c_str(), H5P_DEFAULT), H5Gclose);
    DT_CHECK(g.ok(), "golden: {}: cannot open group '{}'", path_, group);
    hsize_t idx = 0;
    DT_CHECK(H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &out) >= 0,
             "golden: {}: cannot list group '{}'", path_, group);
    return out;
  }

  // A string attribute of the root group (fixed-length or variable-length).
  std::string attr_string(const std::string& name) const {
    Handle a = open_attr(name);
    Handle ftype(H5Aget_type(a.get()), H5Tclose);
    DT_CHECK(H5Tget_class(ftype.get()) == H5T_STRING, "golden: {}: attribute '{}' is not a string", path_, name);
    Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    if (H5Tis_variable_str(ftype.get()) > 0) {
      H5Tset_size(mtype.get(), H5T_VARIABLE);
      char* s = nullptr;
      DT_CHECK(H5Aread(a.get(), mtype.get(), &s) >= 0 && s, "golden: {}: cannot read attribute '{}'", path_, name);
      std::string out(s);
      H5free_memory(s);
      return out;
    }
    size_t size = H5Tget_size(ftype.get()) + 1;  // room for the terminating NUL of a C string
    H5Tset_size(mtype.get(), size);
    std::string out(size, '\0');
    DT_CHECK(H5Aread(a.get(), mtype.get(), out.data()) >= 0, "golden: {}: cannot read attribute '{}'", path_, name);
    out.resize(out.find_last_not_of('\0') + 1);
    return out;
  }

  double attr_double(const std::string& name) const {
    Handle a = open_attr(name);
    double v = 0;
    DT_CHECK(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) >= 0, "golden: {}: cannot read attribute '{}'", path_, name);
    return v;
  }

 private:
  Handle open(const std::string& name) const {
    DT_CHECK(has(name), "golden: {}: no dataset '{}'", path_, name);
    Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose);
    DT_CHECK(ds.ok(), "golden: {}: '{}' is not a dataset", path_, name);
    return ds;
  }
  Handle open_attr(const std::string& name) const {
    DT_CHECK(H5Aexists(file_, name.c_str()) > 0, "golden: {}: no root attribute '{}'", path_, name);
    return Handle(H5Aopen(file_, name.c_str(), H5P_DEFAULT), H5Aclose);
  }

  std::string path_;
  hid_t file_ = -1;
};

// ---------------------------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------------------------

// A tensor (f32, f64 or bf16, any device, contiguous) as host doubles.
inline std::vector<double> to_host_f64(const Tensor& t) {
  DT_CHECK(t.is_contiguous(), "golden: {} is not contiguous", t.str());
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF64) {
    device_copy(out.data(), Device::kCPU, t.data, t.device, t.bytes());
  } else if (t.dtype == DType::kBF16) {
    std::vector<uint16_t> h(out.size());
    device_copy(h.data(), Device::kCPU, t.data, t.device, t.bytes());
    for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_f32(h[i]);
  } else {
    DT_CHECK(t.dtype == DType::kF32, "golden: {} is neither f32 nor f64", t.str());
    std::vector<float> f(out.size());
    device_copy(f.data(), Device::kCPU, t.data, t.device, t.bytes());
    out.assign(f.begin(), f.end());
  }
  return out;
}

// Host floats into a tensor of the same number of elements (f32, f64 or bf16, any device).
inline void from_host(const Tensor& t, const std::vector<float>& v) {
  DT_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "golden: {} values for {}", v.size(), t.str());
  if (t.dtype == DType::kF32) {
    device_copy(t.data, t.device, v.data(), Device::kCPU, t.bytes());
  } else if (t.dtype == DType::kBF16) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
    device_copy(t.data, t.device, h.data(), Device::kCPU, t.bytes());
  } else {
    std::vector<double> d(v.begin(), v.end());
    device_copy(t.data, t.device, d.data(), Device::kCPU, t.bytes());
  }
}

// ||ours - ref|| / ||ref||; infinite when the sizes differ or anything is not finite.
inline double rel_error(const std::vector<double>& ours, const std::vector<double>& ref) {
  if (ours.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ours[i])) return INFINITY;
    num += (ours[i] - ref[i]) * (ours[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Every compared tensor with its error and tolerance. Printed whole (a mismatch is easier to
// place with all errors in view), and each line above its tolerance fails the test.
class ErrorTable {
 public:
  explicit ErrorTable(std::string title) : title_(std::move(title)) {}
  void add(const std::string& name, double err, double tol) { rows_.push_back({name, err, tol}); }
  void check() const {
    int bad = 0;
    std::string text = "golden " + title_ + ": relative error ||ours - ref|| / ||ref|| per tensor\n";
    for (const Row& r : rows_) {
      bool ok = r.err <= r.tol;
      bad += !ok;
      text += fmt::format("  {:4s} {:62s} {:10.3e}  (tol {:.0e})\n", ok ? "ok" : "FAIL", r.name, r.err, r.tol);
    }
    text += fmt::format("  {} of {} tensors within tolerance\n", rows_.size() - bad, rows_.size());
    std::cout << text;
    for (const Row& r : rows_) EXPECT_LE(r.err, r.tol) << title_ << ": " << r.name;
  }

 private:
  struct Row {
    std::string name;
    double err, tol;
  };
  std::string title_;
  std::vector<Row> rows_;
};

// Copies every /params/<name> of the file into the parameter of the same name. Every HF weight
// must map onto exactly one of ours and vice versa, with the same shape; otherwise this adds a
// failure listing the differences and returns false.
inline bool load_params(const GoldenFile& f, ParamStore& ps) {
  std::vector<std::string> hf = f.names("params");
  std::set<std::string> hf_set(hf.begin(), hf.end()), ours_set;
  for (const ParamInfo& p : ps.infos()) ours_set.insert(p.name);
  std::string missing, extra, shapes;
  for (const std::string& n : hf)
    if (!ours_set.count(n)) missing += "\n  " + n;
  for (const std::string& n : ours_set)
    if (!hf_set.count(n)) extra += "\n  " + n;
  for (const std::string& n : hf) {
    if (!ours_set.count(n)) continue;
    Shape hf_shape(f.shape("params/" + n)), our_shape = ps.param(n).shape;
    if (!(hf_shape == our_shape)) shapes += fmt::format("\n  {}: HF {} ours {}", n, hf_shape.str(), our_shape.str());
  }
  if (!missing.empty() || !extra.empty() || !shapes.empty()) {
    ADD_FAILURE() << f.path() << ": the parameters do not map one to one onto Hugging Face's"
                  << (missing.empty() ? "" : "\nHF weights we lack:" + missing)
                  << (extra.empty() ? "" : "\nour parameters HF lacks:" + extra)
                  << (shapes.empty() ? "" : "\nshapes that differ:" + shapes);
    return false;
  }
  for (const std::string& n : hf) from_host(ps.master(n), f.read<float>("params/" + n));
  ps.sync_compute();  // the GPU's bf16 copies
  return true;
}

// Adds one row per parameter: our accumulated gradient against /grads/<name>.
inline void compare_grads(const GoldenFile& f, ParamStore& ps, ErrorTable& errors, double tol) {
  for (const std::string& n : f.names("grads"))
    errors.add("grad " + n, rel_error(to_host_f64(ps.grad(n)), f.read<double>("grads/" + n)), tol);
}

// One layer's results on a layer file's inputs: y and dx, and every weight gradient by name.
struct LayerRun {
  std::vector<double> y, dx;
  std::vector<std::pair<std::string, std::vector<double>>> grads;
};

// Runs one layer of config `cfg` on a layer file (x, R, params; attribute prefix): y = layer(x),
// then the backward of sum(y * R), in float32 on the CPU (ctx == nullptr) or in bf16 mixed
// precision on the GPU (`ctx` from a CUDA runtime). Outputs are poisoned first, so anything
// forward or backward leaves unwritten shows as NaN.
template <class L>
LayerRun run_layer(const GoldenFile& f, const ModelConfig& cfg, Context* gpu_ctx) {
  const Device device = gpu_ctx ? Device::kCUDA : Device::kCPU;
  std::vector<int64_t> xs = f.shape("x");
  DT_CHECK(xs.size() == 3u && xs[2] == cfg.d_model, "golden layer file: x must be [B, T, d_model = {}]",
           cfg.d_model);
  const int B = static_cast<int>(xs[0]), T = static_cast<int>(xs[1]);
  const int64_t C = xs[2];

  ParamStore ps(DType::kF32, device);
  Arena acts("activations", device);
  L layer(cfg, f.attr_string("prefix"));
  layer.declare(ps, acts, B, T);
  ps.allocate();
  acts.allocate();
  DT_CHECK(load_params(f, ps), "golden layer file: the parameters do not match the layer");

  Arena io("golden io", device);
  const DType act = ps.act_dtype();
  int x = io.declare("x", act, {B, T, C}), y = io.declare("y", act, {B, T, C});
  int dy = io.declare("dy", act, {B, T, C}), dx = io.declare("dx", act, {B, T, C});
  io.allocate();
  from_host(io.get(x), f.read<float>("x"));
  from_host(io.get(dy), f.read<float>("R"));  // d sum(y * R) / dy = R
  Context cpu_ctx;
  Context& ctx = gpu_ctx ? *gpu_ctx : cpu_ctx;
  fill(ctx, io.get(y), NAN);
  fill(ctx, io.get(dx), NAN);
  ps.zero_grads();
  layer.forward(ctx, io.get(x), io.get(y));
  layer.backward(ctx, io.get(dy), io.get(dx));

  LayerRun r{to_host_f64(io.get(y)), to_host_f64(io.get(dx)), {}};
  for (const std::string& n : f.names("grads")) r.grads.emplace_back(n, to_host_f64(ps.grad(n)));
  return r;
}

// One layer alone against a layer file (x, R, y, dx, params, grads; attributes config_json and
// prefix), on the CPU in float32 or on the GPU in bf16 (`gpu_ctx`). `config_from_hf` maps the
// file's Hugging Face config; `adjust` may then change it (chunk size).
template <class L, class MapConfig, class Adjust>
void check_layer(const std::string& file, const std::string& title, MapConfig config_from_hf, Adjust adjust,
                 double tol_out, double tol_grad, Context* gpu_ctx = nullptr) {
  GoldenFile f(golden_path(file));
  ModelConfig cfg = config_from_hf(nlohmann::json::parse(f.attr_string("config_json")));
  adjust(cfg);
  const LayerRun r = run_layer<L>(f, cfg, gpu_ctx);
  ErrorTable errors(title);
  errors.add("y", rel_error(r.y, f.read<double>("y")), tol_out);
  errors.add("dx", rel_error(r.dx, f.read<double>("dx")), tol_grad);
  for (const auto& [n, g] : r.grads) errors.add("grad " + n, rel_error(g, f.read<double>("grads/" + n)), tol_grad);
  errors.check();
}

// The same layer file's inputs and weights through a config that the file's reference does not
// cover (`adjust`): the GPU's bf16 results against our CPU float32 layer, which the file checks.
template <class L, class MapConfig, class Adjust>
void check_layer_against_cpu(const std::string& file, MapConfig config_from_hf, Adjust adjust, double tol_out,
                             double tol_grad, Context& gpu_ctx) {
  GoldenFile f(golden_path(file));
  ModelConfig cfg = config_from_hf(nlohmann::json::parse(f.attr_string("config_json")));
  adjust(cfg);
  const LayerRun cpu = run_layer<L>(f, cfg, nullptr), gpu = run_layer<L>(f, cfg, &gpu_ctx);
  ErrorTable errors(file + " on the GPU (bf16) against the CPU (fp32), same config");
  errors.add("y", rel_error(gpu.y, cpu.y), tol_out);
  errors.add("dx", rel_error(gpu.dx, cpu.dx), tol_grad);
  for (size_t i = 0; i < cpu.grads.size(); ++i)
    errors.add("grad " + cpu.grads[i].first, rel_error(gpu.grads[i].second, cpu.grads[i].second), tol_grad);
  errors.check();
}

}  // namespace dt::golden
