#include "trainer/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>

#include "core/error.h"
#include "trainer/yaml_keys.h"

namespace dt {

namespace {

// Every field, in file order: f(key path, field). The one list that parsing,
// writing, comparing and the key listing all walk, so they cannot drift apart.
// Sections must stay contiguous (config_to_yaml opens each once).
template <class C, class F>
void visit_fields(C& c, F&& f) {
  auto& m = c.model;
  f("model.vocab_size", m.vocab_size);
  f("model.d_model", m.d_model);
  f("model.d_ff", m.d_ff);
  f("model.layers", m.layers);
  f("model.tie_embeddings", m.tie_embeddings);
  f("model.zero_centered_norm", m.zero_centered_norm);
  f("model.norm_eps", m.norm_eps);
  f("model.init_std", m.init_std);
  f("model.attn.n_heads", m.attn.n_heads);
  f("model.attn.n_kv_heads", m.attn.n_kv_heads);
  f("model.attn.head_dim", m.attn.head_dim);
  f("model.attn.rotary_dim", m.attn.rotary_dim);
  f("model.attn.rope_theta", m.attn.rope_theta);
  f("model.attn.qk_norm", m.attn.qk_norm);
  f("model.attn.output_gate", m.attn.output_gate);
  f("model.mla.n_heads", m.mla.n_heads);
  f("model.mla.q_lora_rank", m.mla.q_lora_rank);
  f("model.mla.kv_lora_rank", m.mla.kv_lora_rank);
  f("model.mla.qk_nope_head_dim", m.mla.qk_nope_head_dim);
  f("model.mla.qk_rope_head_dim", m.mla.qk_rope_head_dim);
  f("model.mla.v_head_dim", m.mla.v_head_dim);
  f("model.mla.rope_theta", m.mla.rope_theta);
  f("model.mla.rope_interleave", m.mla.rope_interleave);
  f("model.gdn.n_k_heads", m.gdn.n_k_heads);
  f("model.gdn.n_v_heads", m.gdn.n_v_heads);
  f("model.gdn.head_k_dim", m.gdn.head_k_dim);
  f("model.gdn.head_v_dim", m.gdn.head_v_dim);
  f("model.gdn.conv_kernel", m.gdn.conv_kernel);
  f("model.gdn.chunk_size", m.gdn.chunk_size);
  f("data.train", c.data.train);
  f("data.val", c.data.val);
  f("data.shuffle", c.data.shuffle);
  f("data.require_manifest", c.data.require_manifest);
  auto& t = c.train;
  f("train.batch_size", t.batch_size);
  f("train.grad_accum", t.grad_accum);
  f("train.seq_len", t.seq_len);
  f("train.steps", t.steps);
  f("train.lr", t.lr);
  f("train.min_lr", t.min_lr);
  f("train.warmup_steps", t.warmup_steps);
  f("train.weight_decay", t.weight_decay);
  f("train.beta1", t.beta1);
  f("train.beta2", t.beta2);
  f("train.eps", t.eps);
  f("train.grad_clip", t.grad_clip);
  f("train.max_skips_in_a_row", t.max_skips_in_a_row);
  f("train.eval_every", t.eval_every);
  f("train.eval_batches", t.eval_batches);
  f("train.checkpoint_every", t.checkpoint_every);
  f("train.keep_last", t.keep_last);
  f("train.save_optimizer", t.save_optimizer);
  f("train.seed", t.seed);
  f("run.dir", c.run.dir);
  f("run.name", c.run.name);
  f("run.device", c.run.device);
  f("run.threads", c.run.threads);
  f("run.log_every", c.run.log_every);
  f("parallel.tp", c.parallel.tp);
  f("parallel.zero1", c.parallel.zero1);
  f("parallel.overlap_grad_sync", c.parallel.overlap_grad_sync);
  f("parallel.bucket_mb", c.parallel.bucket_mb);
  f("parallel.timeout_s", c.parallel.timeout_s);
}

using FieldValue = std::variant<int, uint64_t, double, bool, std::string, std::vector<MixerKind>>;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The key table: leaves, sections (every proper prefix of a leaf), children per section.
struct KeyTable {
  std::vector<std::string> leaves;
  std::set<std::string> leaf_set;
  std::set<std::string> sections;                             // "" is the top level
  std::map<std::string, std::vector<std::string>> children;  // section -> child names, in order

  KeyTable() {
    Config c;
    visit_fields(c, [&](const char* key, auto&) {
      std::string k = key;
      leaves.push_back(k);
      leaf_set.insert(k);
      std::vector<std::string> parts = split(k, '.');
      std::string prefix;
      for (const std::string& p : parts) {
        std::vector<std::string>& ch = children[prefix];
        if (std::find(ch.begin(), ch.end(), p) == ch.end()) ch.push_back(p);
        sections.insert(prefix);
        prefix = prefix.empty() ? p : prefix + "." + p;
      }
    });
  }

  // "unknown key 'model.atn'. Did you mean 'model.attn'? The keys of 'model' are: ..."
  std::string unknown(const std::string& section, const std::string& name) const {
    std::string full = section.empty() ? name : section + "." + name;
    std::string msg = fmt::format("unknown key '{}'.", full);
    std::string suggestion;
    for (const std::string& leaf : leaves) {  // the right name in the wrong section
      if (split(leaf, '.').back() == name) {
        suggestion = leaf;
        break;
      }
    }
    if (suggestion.empty()) {
      size_t best = std::max<size_t>(2, name.size() / 3) + 1;
      for (const std::string& ch : children.at(section)) {
        size_t d = edit_distance(name, ch);
        if (d < best) best = d, suggestion = section.empty() ? ch : section + "." + ch;
      }
    }
    if (!suggestion.empty()) msg += fmt::format(" Did you mean '{}'?", suggestion);
    if (section.empty())
      msg += fmt::format(" The sections are: {}.", join(children.at(""), ", "));
    else
      msg += fmt::format(" The keys of '{}' are: {}.", section, join(children.at(section), ", "));
    return msg;
  }
};

const KeyTable& key_table() {
  static const KeyTable table;
  return table;
}

// Where a node came from, for messages: "file.yaml:12" or "--set train.lr=abc".
struct Origins {
  std::string source;
  std::map<std::string, std::string> sets;  // key path -> the --set argument

  std::string where(const std::string& path, const YAML::Node& node) const {
    for (std::string p = path;;) {  // the path or a section above it came from --set
      auto it = sets.find(p);
      if (it != sets.end()) return fmt::format("--set {}", it->second);
      size_t dot = p.rfind('.');
      if (dot == std::string::npos) break;
      p.resize(dot);
    }
    if (node.IsDefined() && node.Mark().line >= 0) return fmt::format("{}:{}", source, node.Mark().line + 1);
    return source;
  }
};

std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

bool read_scalar(const YAML::Node& n, int& out) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return false;
  out = static_cast<int>(v);
  return true;
}

bool read_scalar(const YAML::Node& n, uint64_t& out) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool read_scalar(const YAML::Node& n, double& out) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

bool read_scalar(const YAML::Node& n, bool& out) { return n.IsScalar() && YAML::convert<bool>::decode(n, out); }

bool read_scalar(const YAML::Node& n, std::string& out) {
  if (!n.IsScalar()) return false;
  out = n.Scalar();
  return true;
}

const char* expected(const int&) { return "an integer"; }
const char* expected(const uint64_t&) { return "a non-negative integer"; }
const char* expected(const double&) { return "a finite number"; }
const char* expected(const bool&) { return "true or false"; }
const char* expected(const std::string&) { return "a string"; }

// `where` is where the key sits ("file.yaml:12" or "--set ...").
void read_field(const YAML::Node& n, const std::string& path, std::vector<MixerKind>& out, const std::string& where) {
  if (n.IsScalar()) {
    try {
      out = parse_layer_pattern(n.Scalar(), path);
    } catch (const Error& e) {
      DT_FAIL("{}: {}", where, e.what());
    }
    return;
  }
  DT_CHECK(n.IsSequence(), "{}: {} must be a list of mixers like [gdn, gdn, attn] or a repeat like "
           "\"[gdn, gdn, gdn, attn] * 3\", got {}", where, path, describe(n));
  std::vector<MixerKind> layers;
  for (const YAML::Node& item : n) {
    DT_CHECK(item.IsScalar(), "{}: {}: each entry must be a mixer name (gdn, attn, mla), got {}", where, path,
             describe(item));
    try {
      std::vector<MixerKind> one = parse_layer_pattern(item.Scalar(), path);
      layers.insert(layers.end(), one.begin(), one.end());
    } catch (const Error& e) {
      DT_FAIL("{}: {}", where, e.what());
    }
  }
  out = std::move(layers);
}

template <class T>
void read_field(const YAML::Node& n, const std::string& path, T& out, const std::string& where) {
  T v{};
  DT_CHECK(read_scalar(n, v), "{}: {} must be {}, got {}", where, path, expected(v), describe(n));
  out = v;
}

// The key and value nodes at a dotted path; both undefined when absent.
std::pair<YAML::Node, YAML::Node> find_entry(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = root;  // copies share the tree; reset() rebinds, operator= would assign
  YAML::Node key(YAML::NodeType::Undefined);
  for (const std::string& part : split(path, '.')) {
    if (!cur.IsMap()) return {YAML::Node(YAML::NodeType::Undefined), YAML::Node(YAML::NodeType::Undefined)};
    bool found = false;
    for (const auto& kv : cur) {
      if (kv.first.IsScalar() && kv.first.Scalar() == part) {
        key.reset(kv.first);
        cur.reset(kv.second);
        found = true;
        break;
      }
    }
    if (!found) return {YAML::Node(YAML::NodeType::Undefined), YAML::Node(YAML::NodeType::Undefined)};
  }
  return {key, cur};
}

void check_keys(const YAML::Node& map, const std::string& section, const Origins& o) {
  const KeyTable& kt = key_table();
  for (const auto& kv : map) {
    const YAML::Node& key = kv.first;
    DT_CHECK(key.IsScalar(), "{}: keys must be names, got {} in section '{}'", o.where(section, key),
             describe(key), section);
    std::string full = section.empty() ? key.Scalar() : section + "." + key.Scalar();
    if (kt.leaf_set.count(full)) continue;
    if (kt.sections.count(full)) {
      const YAML::Node& v = kv.second;
      if (v.IsNull()) continue;
      DT_CHECK(v.IsMap(), "{}: '{}' is a section: it takes keys ({}), not {}", o.where(full, key), full,
               join(kt.children.at(full), ", "), describe(v));
      check_keys(v, full, o);
      continue;
    }
    DT_FAIL("{}: {}", o.where(full, key), kt.unknown(section, key.Scalar()));
  }
}

// --set key.path=value: checks the key, parses the value as YAML and puts it into the tree.
void apply_set(YAML::Node& root, const std::string& set, Origins& o) {
  size_t eq = set.find('=');
  DT_CHECK(eq != std::string::npos && eq > 0,
           "--set '{}': expected key.path=value, e.g. --set train.lr=3e-4", set);
  std::string key = set.substr(0, eq), text = set.substr(eq + 1);
  const KeyTable& kt = key_table();
  std::string prefix;
  for (const std::string& part : split(key, '.')) {  // the first unknown part is the one to name
    std::string full = prefix.empty() ? part : prefix + "." + part;
    if (!kt.leaf_set.count(full) && !kt.sections.count(full)) DT_FAIL("--set {}: {}", set, kt.unknown(prefix, part));
    DT_CHECK(full == key || !kt.leaf_set.count(full), "--set {}: '{}' is a value, not a section", set, full);
    prefix = full;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    DT_FAIL("--set {}: the value is not valid YAML ({}); quote it or write a plain number, word or [list]", set,
            e.msg);
  }
  DT_CHECK(!value.IsNull(), "--set {}: no value given; write --set {}=VALUE", set, key);
  if (!root.IsMap()) root.reset(YAML::Node(YAML::NodeType::Map));
  YAML::Node cur = root;
  std::vector<std::string> parts = split(key, '.');
  prefix.clear();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix = prefix.empty() ? parts[i] : prefix + "." + parts[i];
    YAML::Node next = cur[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[parts[i]]);
    }
    DT_CHECK(next.IsMap(), "--set {}: '{}' in the config file is {}, not a section", set, prefix, describe(next));
    cur.reset(next);
  }
  cur[parts.back()] = value;
  o.sets[key] = set;
}

std::string format_double(double v) { return fmt::format("{}", v); }  // shortest round-trip form

}  // namespace

std::vector<MixerKind> parse_layer_pattern(const std::string& text, const std::string& key) {
  // pattern := term ('+' term)* ;  term := ('[' name (',' name)* ']' | name) ('*' count)?
  size_t pos = 0;
  auto fail = [&](const std::string& what) -> void {
    DT_FAIL("{}: cannot read the layer pattern \"{}\": expected {} at column {}; write a list like "
            "[gdn, gdn, attn] or a repeat like \"[gdn, gdn, gdn, attn] * 3\"",
            key, text, what, pos + 1);
  };
  auto skip = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  auto accept = [&](char ch) {
    skip();
    if (pos < text.size() && text[pos] == ch) return ++pos, true;
    return false;
  };
  auto name = [&]() -> MixerKind {
    skip();
    size_t start = pos;
    while (pos < text.size() && (std::isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '_')) ++pos;
    std::string word = text.substr(start, pos - start);
    if (word.empty()) pos = start, fail("a mixer name (gdn, attn, mla)");
    for (MixerKind k : {MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla})
      if (word == mixer_name(k)) return k;
    DT_FAIL("{}: unknown mixer '{}' in \"{}\"; the mixers are gdn (Gated DeltaNet), attn (softmax GQA) "
            "and mla (multi-head latent attention)", key, word, text);
  };
  std::vector<MixerKind> out;
  do {
    std::vector<MixerKind> term;
    if (accept('[')) {
      if (!accept(']')) {
        do term.push_back(name());
        while (accept(','));
        if (!accept(']')) fail("',' or ']'");
      }
    } else {
      term.push_back(name());
    }
    if (accept('*')) {
      skip();
      size_t start = pos;
      while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
      int count = 0;
      auto [p, ec] = std::from_chars(text.data() + start, text.data() + pos, count);
      if (pos == start || ec != std::errc()) pos = start, fail("a repeat count");
      DT_CHECK(count >= 1 && count <= 10000, "{}: the repeat count in \"{}\" is {}; it must be 1 to 10000",
               key, text, count);
      for (int r = 0; r < count; ++r) out.insert(out.end(), term.begin(), term.end());
    } else {
      out.insert(out.end(), term.begin(), term.end());
    }
  } while (accept('+'));
  skip();
  if (pos != text.size()) fail("'+', '*' or the end");
  return out;
}

std::string layer_pattern_to_string(const std::vector<MixerKind>& layers) {
  size_t n = layers.size(), period = n;
  for (size_t p = 1; p < n; ++p) {
    if (n % p) continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i) repeats = layers[i] == layers[i % p];
    if (repeats) {
      period = p;
      break;
    }
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < period; ++i) names.push_back(mixer_name(layers[i]));
  std::string s = "[" + join(names, ", ") + "]";
  if (period > 0 && n / period > 1) s += fmt::format(" * {}", n / period);
  return s;
}

Config default_config() {
  Config c;
  c.model.layers = parse_layer_pattern("[gdn, gdn, gdn, attn] * 3");
  return c;
}

std::vector<std::string> config_keys() { return key_table().leaves; }

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& sets, const std::string& source) {
  Origins origins{source, {}};
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    std::string hint;
    if (yaml_text.find("] *") != std::string::npos || yaml_text.find("]*") != std::string::npos)
      hint = "; a repeated layer pattern must be quoted: layers: \"[gdn, gdn, gdn, attn] * 3\"";
    DT_FAIL("{}:{}:{}: not valid YAML: {}{}", source, e.mark.line + 1, e.mark.column + 1, e.msg, hint);
  }
  DT_CHECK(root.IsNull() || root.IsMap(),
           "{}: the top level must be a mapping with the sections model, data, train, run, parallel; got {}",
           source, describe(root));
  check_no_duplicate_keys(root, source);
  try {
    for (const std::string& s : sets) apply_set(root, s, origins);
    if (root.IsMap()) check_keys(root, "", origins);
    Config c = default_config();
    visit_fields(c, [&](const char* key, auto& field) {
      auto [key_node, n] = find_entry(root, key);
      if (!n.IsDefined()) return;
      std::string where = origins.where(key, key_node);
      DT_CHECK(!n.IsNull(), "{}: {} has no value; write one, or delete the line to keep the default", where, key);
      read_field(n, key, field, where);
    });
    validate_config(c);
    return c;
  } catch (const YAML::Exception& e) {  // should not happen: every read above is checked
    DT_FAIL("{}: {}", source, e.what());
  }
}

Config load_config(const std::string& path, const std::vector<std::string>& sets) {
  namespace fs = std::filesystem;
  std::error_code ec;
  DT_CHECK(!fs::is_directory(path, ec), "config file '{}' is a directory; pass --config with a YAML file such as "
           "configs/quickstart.yaml", path);
  DT_CHECK(fs::is_regular_file(path, ec),
           "config file '{}' not found (relative to {}); pass --config with a YAML file such as "
           "configs/quickstart.yaml, or see every key with `deltatron train --print-config`",
           path, fs::current_path(ec).string());
  std::ifstream in(path);
  DT_CHECK(in.good(), "cannot read the config file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  Config c = parse_config(ss.str(), sets, path);
  if (c.run.name.empty()) c.run.name = fs::path(path).stem().string();
  return c;
}

std::string config_to_yaml(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // the sections currently open
  visit_fields(c, [&](const char* key, const auto& field) {
    std::vector<std::string> parts = split(key, '.');
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() && open[common] == parts[common]) ++common;
    while (open.size() > common) out << YAML::EndMap, open.pop_back();
    while (open.size() < parts.size()) {
      out << YAML::Key << parts[open.size()] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[open.size()]);
    }
    out << YAML::Key << split(key, '.').back() << YAML::Value;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, double>) {
      out << format_double(field);
    } else if constexpr (std::is_same_v<T, std::string>) {
      out << YAML::DoubleQuoted << field;
    } else if constexpr (std::is_same_v<T, std::vector<MixerKind>>) {
      std::string s = layer_pattern_to_string(field);
      if (s.find('*') != std::string::npos) {
        out << YAML::DoubleQuoted << s;
      } else {
        out << YAML::Flow << YAML::BeginSeq;
        for (MixerKind k : field) out << mixer_name(k);
        out << YAML::EndSeq;
      }
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      out << static_cast<unsigned long long>(field);
    } else {
      out << field;
    }
  });
  while (!open.empty()) out << YAML::EndMap, open.pop_back();
  out << YAML::EndMap;
  DT_CHECK(out.good(), "internal error writing the config as YAML: {}", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

std::vector<std::pair<std::string, std::string>> config_values(const Config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  visit_fields(c, [&](const char* key, const auto& field) {
    using T = std::decay_t<decltype(field)>;
    std::string text;
    if constexpr (std::is_same_v<T, double>) {
      text = format_double(field);
    } else if constexpr (std::is_same_v<T, std::string>) {
      text = "\"" + field + "\"";
    } else if constexpr (std::is_same_v<T, std::vector<MixerKind>>) {
      text = layer_pattern_to_string(field);
    } else if constexpr (std::is_same_v<T, bool>) {
      text = field ? "true" : "false";
    } else {
      text = fmt::format("{}", field);
    }
    out.emplace_back(key, std::move(text));
  });
  return out;
}

bool config_equal(const Config& a, const Config& b) {
  auto values = [](const Config& c) {
    std::vector<FieldValue> v;
    visit_fields(c, [&](const char*, const auto& field) { v.emplace_back(field); });
    return v;
  };
  return values(a) == values(b);
}

}  // namespace dt
