// Importing a Hugging Face model folder as a run (imports/import_model.h): read the family's config.json into
// attograd's model options, plan every attograd parameter as a recipe over the source's tensors, and write
// the checkpoint one tensor at a time from the mapped source files.
#include "imports/import_model.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/processing.h"
#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/model_factory.h"
#include "train/safetensors.h"
#include "train/tasks.h"

namespace imports {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

// ---------------------------------------------------------------------------------------------------------
// The family's config.json

struct HfConfig {
  std::string path;
  json j;

  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int64_t integer(const char* key) const {
    if (!has(key)) bad(path + ": " + key + ": missing, expected a positive integer");
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1)
      bad(path + ": " + key + ": expected a positive integer, got " + j[key].dump());
    return j[key].get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_number()) bad(path + ": " + key + ": expected a number, got " + j[key].dump());
    return j[key].get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) bad(path + ": " + key + ": expected true or false, got " + j[key].dump());
    return j[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_string()) bad(path + ": " + key + ": expected a string, got " + j[key].dump());
    return j[key].get<std::string>();
  }
  void expect(const char* key, const std::string& value, const std::string& fallback) const {
    const std::string v = string(key, fallback);
    if (v != value) bad(path + ": " + key + ": \"" + v + "\" is not supported (expected \"" + value + "\")");
  }
};

// ---------------------------------------------------------------------------------------------------------
// The source's tensors, over one file or the shards of an index

class Source {
 public:
  explicit Source(const std::string& dir) : dir_(dir) {
    const std::string index = dir + "/model.safetensors.index.json";
    const std::string single = dir + "/model.safetensors";
    if (fs::exists(index)) {
      // An index of a large model is a few hundred KB: 64 MB bounds it generously.
      const json j = io::load_json_file(index, size_t(64) << 20);
      if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        bad(index + ": weight_map: missing, expected an object of tensor name to file name");
      std::map<std::string, size_t> file_of;
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string()) bad(index + ": weight_map." + name + ": expected a file name");
        const std::string f = file.get<std::string>();
        if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
          bad(index + ": weight_map." + name + ": \"" + f + "\" is not a file name in the folder");
        if (!file_of.count(f)) {
          file_of[f] = files_.size();
          files_.push_back(std::make_unique<train::MappedSafetensors>(dir + "/" + f));
          names_.push_back(f);
        }
        const train::MappedSafetensors& m = *files_[file_of[f]];
        const train::MappedSafetensors::Tensor* t = m.find(name);
        if (!t) bad(m.path() + ": " + name + ": missing, but the index names this file for it");
        index_[name] = {&m, t};
      }
      for (const auto& m : files_)
        for (const auto& t : m->tensors())
          if (!index_.count(t.name)) bad(m->path() + ": " + t.name + ": not in the index's weight_map");
    } else if (fs::exists(single)) {
      files_.push_back(std::make_unique<train::MappedSafetensors>(single));
      names_.push_back("model.safetensors");
      for (const auto& t : files_.front()->tensors()) index_[t.name] = {files_.front().get(), &t};
    } else {
      bad(dir +
          ": no model.safetensors or model.safetensors.index.json (a pytorch_model.bin is not read: "
          "convert the folder with scripts/convert_torch_bin.py)");
    }
  }

  bool has(const std::string& name) const { return index_.count(name) > 0; }

  // The tensor's values as float32, checked against the shape the family's config implies.
  std::vector<float> get(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = index_.find(name);
    if (it == index_.end()) bad(dir_ + ": " + name + ": missing tensor, expected shape " + shape_text(shape));
    const auto& [file, t] = it->second;
    if (t->shape != shape)
      bad(file->path() + ": " + name + ": shape " + shape_text(t->shape) + ", but config.json implies " +
          shape_text(shape));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    file->read(*t, values.data());
    file->release(*t);
    used_.insert(name);
    return values;
  }

  // Every tensor the import did not read must be one the family's code rebuilds rather than loads.
  void check_all_used(const std::function<bool(const std::string&)>& ignorable) const {
    for (const auto& [name, entry] : index_)
      if (!used_.count(name) && !ignorable(name))
        bad(entry.first->path() + ": " + name + ": unexpected tensor (the family's mapping does not use it)");
  }

  const std::vector<std::string>& file_names() const { return names_; }
  // The dtypes of the tensors read (not of the buffers skipped, such as a BOOL causal mask).
  std::vector<std::string> dtypes() const {
    std::set<std::string> seen;
    for (const std::string& name : used_) seen.insert(train::dtype_name(index_.at(name).second->dtype));
    return {seen.begin(), seen.end()};
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<train::MappedSafetensors>> files_;
  std::vector<std::string> names_;
  std::map<std::string, std::pair<const train::MappedSafetensors*, const train::MappedSafetensors::Tensor*>>
      index_;
  std::set<std::string> used_;
};

// ---------------------------------------------------------------------------------------------------------
// The plan: each attograd parameter, its shape and how its values come from the source

using Fill = std::function<void(std::vector<float>&)>;

struct Plan {
  nn::ModelShape shape;
  int64_t max_len = 0;
  std::vector<train::TensorSpec> specs;
  std::vector<Fill> fills;
  // Model fields written into the config's JSON over the shape's: n_kv_heads and attn_window, where the
  // family sets them.
  json model_fields = json::object();
  std::function<bool(const std::string&)> ignorable = [](const std::string&) { return false; };

  void add(const std::string& name, std::vector<int64_t> dims, Fill fill) {
    specs.push_back({name, std::move(dims)});
    fills.push_back(std::move(fill));
  }
};

// out (rows, cols) = the columns [offset, offset + rows) of src (cols, stride), transposed: a Conv1D
// weight stored (in, out) read as a Linear's (out, in).
void transpose_columns(const std::vector<float>& src, int64_t stride, int64_t offset, int64_t rows,
                       int64_t cols, std::vector<float>& out) {
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t i = 0; i < cols; ++i) out[o * cols + i] = src[i * stride + offset + o];
}

// The rotary positions' base and fraction of each head, in either spelling transformers writes. Before
// version 5: top-level fields (rope_theta, or the family's own names) and rope_scaling null. From version 5:
// rope_parameters {"rope_type": "default", "rope_theta": ..., "partial_rotary_factor": ...}, which wins.
// Only unscaled rotary positions are supported: any other rope_type (linear, dynamic, yarn, llama3, ...) and
// rope_parameters per layer type are refused.
struct Rotary {
  double base = 10000;
  double fraction = 1;
};
// The first of `keys` the config sets, or `fallback`; every key set must be a number.
double first_number(const HfConfig& c, const std::vector<const char*>& keys, double fallback) {
  std::optional<double> first;
  for (const char* key : keys) {
    const double value = c.number(key, fallback);
    if (!first && c.has(key)) first = value;
  }
  return first.value_or(fallback);
}

Rotary rotary_of(const HfConfig& c, const std::vector<const char*>& base_keys, const Rotary& fallback,
                 const std::vector<const char*>& fraction_keys) {
  Rotary r{first_number(c, base_keys, fallback.base), first_number(c, fraction_keys, fallback.fraction)};
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!c.has(key)) continue;
    const json& p = c.j[key];
    const std::string at = c.path + ": " + key;
    if (!p.is_object()) bad(at + ": expected an object or null, got " + p.dump());
    for (const auto& item : p.items())
      if (item.value().is_object())
        bad(at + "." + item.key() + ": rotary parameters per layer type are not supported");
    for (const char* type_key : {"rope_type", "type"})
      if (p.contains(type_key) && p[type_key] != "default")
        bad(at + "." + type_key + ": " + p[type_key].dump() +
            " is not supported (only unscaled rotary positions, \"default\")");
    if (p.contains("rope_theta")) {
      if (!p["rope_theta"].is_number() || p["rope_theta"].get<double>() <= 0)
        bad(at + ".rope_theta: expected a positive number, got " + p["rope_theta"].dump());
      r.base = p["rope_theta"].get<double>();
    }
    if (p.contains("partial_rotary_factor")) {
      if (!p["partial_rotary_factor"].is_number())
        bad(at + ".partial_rotary_factor: expected a number, got " + p["partial_rotary_factor"].dump());
      r.fraction = p["partial_rotary_factor"].get<double>();
    }
  }
  if (!(r.base > 0)) bad(c.path + ": rope_theta: expected a positive number, got " + std::to_string(r.base));
  if (!(r.fraction > 0 && r.fraction <= 1))
    bad(c.path + ": partial_rotary_factor: expected a number in (0, 1], got " + std::to_string(r.fraction));
  return r;
}

// transformers' names of GELU: "gelu" is the exact (erf) form, the others its tanh approximation.
nn::Activation gelu_kind(const HfConfig& c, const char* key, const std::string& fallback) {
  const std::string act = c.string(key, fallback);
  if (act == "gelu") return nn::Activation::gelu_erf;
  if (act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") return nn::Activation::gelu;
  bad(c.path + ": " + key + ": \"" + act +
      "\" is not supported (gelu, gelu_new, gelu_fast or gelu_pytorch_tanh)");
}

Fill copy_of(Source& s, const std::string& name, std::vector<int64_t> dims) {
  return [&s, name, dims](std::vector<float>& out) { out = s.get(name, dims); };
}
Fill zeros() {
  return [](std::vector<float>& out) { std::fill(out.begin(), out.end(), 0.0f); };
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The config.json fields a family gives its dimensions in (vocab_size is every family's). A d_ff_multiple
// above 0 makes d_ff optional: that multiple of d_model when the field is absent.
struct DimensionFields {
  const char* d_model;
  const char* n_heads;
  const char* n_layers;
  const char* d_ff;
  int64_t d_ff_multiple;
  const char* max_len;
};
constexpr DimensionFields kGpt2Dimensions{"n_embd", "n_head", "n_layer", "n_inner", 4, "n_positions"};
constexpr DimensionFields kGptNeoDimensions{"hidden_size",       "num_heads", "num_layers",
                                            "intermediate_size", 4,           "max_position_embeddings"};
// GPT-NeoX/Pythia's and Llama's.
constexpr DimensionFields kHiddenSizeDimensions{"hidden_size",
                                                "num_attention_heads",
                                                "num_hidden_layers",
                                                "intermediate_size",
                                                0,
                                                "max_position_embeddings"};

// A plan whose model has the dimensions config.json gives under the family's names.
Plan plan_with_dimensions(const HfConfig& c, const DimensionFields& f) {
  Plan p;
  nn::ModelShape& m = p.shape;
  m.d_model = c.integer(f.d_model);
  m.n_heads = c.integer(f.n_heads);
  m.n_layers = c.integer(f.n_layers);
  m.d_ff = f.d_ff_multiple > 0 ? c.integer(f.d_ff, f.d_ff_multiple * m.d_model) : c.integer(f.d_ff);
  m.vocab = c.integer("vocab_size");
  p.max_len = c.integer(f.max_len);
  return p;
}

// GPT-2 (transformers' modeling_gpt2.py): tensors named "h.L..." or "transformer.h.L...".
Plan plan_gpt2(const HfConfig& c, Source& s) {
  Plan p = plan_with_dimensions(c, kGpt2Dimensions);
  nn::ModelShape& m = p.shape;
  m.norm = nn::NormKind::layer;
  m.norm_eps = c.number("layer_norm_epsilon", 1e-5);
  m.activation = gelu_kind(c, "activation_function", "gelu_new");
  if (!c.boolean("scale_attn_weights", true)) bad(c.path + ": scale_attn_weights: false is not supported");
  if (c.boolean("scale_attn_by_inverse_layer_idx", false))
    bad(c.path + ": scale_attn_by_inverse_layer_idx: true is not supported");
  if (!c.boolean("tie_word_embeddings", true)) bad(c.path + ": tie_word_embeddings: false is not supported");
  m.positions = nn::PositionKind::learned;
  m.tie_embeddings = true;
  m.bias = true;

  const std::string pre = s.has("transformer.wte.weight") ? "transformer." : "";
  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab;
  p.add("tok_emb.weight", {V, D}, copy_of(s, pre + "wte.weight", {V, D}));
  p.add("pos_emb.weight", {p.max_len, D}, copy_of(s, pre + "wpe.weight", {p.max_len, D}));
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string h = pre + "h." + std::to_string(l) + ".", b = "blocks." + std::to_string(l) + ".";
    p.add(b + "ln1.weight", {D}, copy_of(s, h + "ln_1.weight", {D}));
    p.add(b + "ln1.bias", {D}, copy_of(s, h + "ln_1.bias", {D}));
    // c_attn (D, 3D): the columns [0, D) are q, [D, 2D) k, [2D, 3D) v.
    const char* names[3] = {"wq", "wk", "wv"};
    for (int64_t j = 0; j < 3; ++j) {
      p.add(b + "attn." + names[j] + ".weight", {D, D}, [&s, h, D, j](std::vector<float>& out) {
        transpose_columns(s.get(h + "attn.c_attn.weight", {D, 3 * D}), 3 * D, j * D, D, D, out);
      });
      p.add(b + "attn." + names[j] + ".bias", {D}, [&s, h, D, j](std::vector<float>& out) {
        const std::vector<float> bias = s.get(h + "attn.c_attn.bias", {3 * D});
        std::copy(bias.begin() + j * D, bias.begin() + (j + 1) * D, out.begin());
      });
    }
    p.add(b + "attn.wo.weight", {D, D}, [&s, h, D](std::vector<float>& out) {
      transpose_columns(s.get(h + "attn.c_proj.weight", {D, D}), D, 0, D, D, out);
    });
    p.add(b + "attn.wo.bias", {D}, copy_of(s, h + "attn.c_proj.bias", {D}));
    p.add(b + "ln2.weight", {D}, copy_of(s, h + "ln_2.weight", {D}));
    p.add(b + "ln2.bias", {D}, copy_of(s, h + "ln_2.bias", {D}));
    p.add(b + "mlp.fc1.weight", {F, D}, [&s, h, D, F](std::vector<float>& out) {
      transpose_columns(s.get(h + "mlp.c_fc.weight", {D, F}), F, 0, F, D, out);
    });
    p.add(b + "mlp.fc1.bias", {F}, copy_of(s, h + "mlp.c_fc.bias", {F}));
    p.add(b + "mlp.fc2.weight", {D, F}, [&s, h, D, F](std::vector<float>& out) {
      transpose_columns(s.get(h + "mlp.c_proj.weight", {F, D}), D, 0, D, F, out);
    });
    p.add(b + "mlp.fc2.bias", {D}, copy_of(s, h + "mlp.c_proj.bias", {D}));
  }
  p.add("ln_f.weight", {D}, copy_of(s, pre + "ln_f.weight", {D}));
  p.add("ln_f.bias", {D}, copy_of(s, pre + "ln_f.bias", {D}));
  p.add("lm_head.bias", {V}, zeros());  // GPT-2's unembedding has none
  // The causal-mask buffers, and lm_head.weight, which is wte's (tied).
  p.ignorable = [](const std::string& n) {
    return ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias") || n == "lm_head.weight";
  };
  return p;
}

// GPT-NeoX and Pythia (modeling_gpt_neox.py).
Plan plan_gpt_neox(const HfConfig& c, Source& s) {
  Plan p = plan_with_dimensions(c, kHiddenSizeDimensions);
  nn::ModelShape& m = p.shape;
  m.norm = nn::NormKind::layer;
  m.norm_eps = c.number("layer_norm_eps", 1e-5);
  m.activation = gelu_kind(c, "hidden_act", "gelu");
  m.positions = nn::PositionKind::rotary;
  // transformers' defaults: a quarter of each head rotated, base 10000.
  const Rotary rotary =
      rotary_of(c, {"rotary_emb_base", "rope_theta"}, {10000, 0.25}, {"rotary_pct", "partial_rotary_factor"});
  m.rotary_fraction = rotary.fraction;
  m.rotary_base = rotary.base;
  m.parallel = c.boolean("use_parallel_residual", true);
  m.tie_embeddings = c.boolean("tie_word_embeddings", false);
  if (!c.boolean("attention_bias", true)) bad(c.path + ": attention_bias: false is not supported");
  m.bias = true;

  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab, H = m.n_heads, dk = D / H;
  if (D % H != 0)
    bad(c.path + ": num_attention_heads: " + std::to_string(H) + " does not divide hidden_size");
  p.add("tok_emb.weight", {V, D}, copy_of(s, "gpt_neox.embed_in.weight", {V, D}));
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string h = "gpt_neox.layers." + std::to_string(l) + ".",
                      b = "blocks." + std::to_string(l) + ".";
    p.add(b + "ln1.weight", {D}, copy_of(s, h + "input_layernorm.weight", {D}));
    p.add(b + "ln1.bias", {D}, copy_of(s, h + "input_layernorm.bias", {D}));
    // query_key_value (3D, D): row h*3dk + j*dk + d is head h's d-th value of q (j 0), k (1) or v (2).
    const char* names[3] = {"wq", "wk", "wv"};
    for (int64_t j = 0; j < 3; ++j) {
      p.add(b + "attn." + names[j] + ".weight", {D, D}, [&s, h, D, H, dk, j](std::vector<float>& out) {
        const std::vector<float> w = s.get(h + "attention.query_key_value.weight", {3 * D, D});
        for (int64_t head = 0; head < H; ++head)
          std::copy_n(w.begin() + (head * 3 * dk + j * dk) * D, dk * D, out.begin() + head * dk * D);
      });
      p.add(b + "attn." + names[j] + ".bias", {D}, [&s, h, D, H, dk, j](std::vector<float>& out) {
        const std::vector<float> w = s.get(h + "attention.query_key_value.bias", {3 * D});
        for (int64_t head = 0; head < H; ++head)
          std::copy_n(w.begin() + head * 3 * dk + j * dk, dk, out.begin() + head * dk);
      });
    }
    p.add(b + "attn.wo.weight", {D, D}, copy_of(s, h + "attention.dense.weight", {D, D}));
    p.add(b + "attn.wo.bias", {D}, copy_of(s, h + "attention.dense.bias", {D}));
    p.add(b + "ln2.weight", {D}, copy_of(s, h + "post_attention_layernorm.weight", {D}));
    p.add(b + "ln2.bias", {D}, copy_of(s, h + "post_attention_layernorm.bias", {D}));
    p.add(b + "mlp.fc1.weight", {F, D}, copy_of(s, h + "mlp.dense_h_to_4h.weight", {F, D}));
    p.add(b + "mlp.fc1.bias", {F}, copy_of(s, h + "mlp.dense_h_to_4h.bias", {F}));
    p.add(b + "mlp.fc2.weight", {D, F}, copy_of(s, h + "mlp.dense_4h_to_h.weight", {D, F}));
    p.add(b + "mlp.fc2.bias", {D}, copy_of(s, h + "mlp.dense_4h_to_h.bias", {D}));
  }
  p.add("ln_f.weight", {D}, copy_of(s, "gpt_neox.final_layer_norm.weight", {D}));
  p.add("ln_f.bias", {D}, copy_of(s, "gpt_neox.final_layer_norm.bias", {D}));
  if (!m.tie_embeddings) p.add("lm_head.weight", {V, D}, copy_of(s, "embed_out.weight", {V, D}));
  p.add("lm_head.bias", {V}, zeros());  // embed_out has none
  p.ignorable = [](const std::string& n) {
    return ends_with(n, ".attention.bias") || ends_with(n, ".attention.masked_bias") ||
           ends_with(n, ".rotary_emb.inv_freq");
  };
  return p;
}

// GPT-Neo (modeling_gpt_neo.py): nn.Linear (out, in) weights, q/k/v without biases, scores not divided by
// sqrt(dk), attention_types expanding to one "global" or "local" per layer, a local layer's query i seeing
// keys i - window_size < j <= i; tied unembedding. Tensors named "h.L..." or "transformer.h.L...".
Plan plan_gpt_neo(const HfConfig& c, Source& s) {
  Plan p = plan_with_dimensions(c, kGptNeoDimensions);
  nn::ModelShape& m = p.shape;
  m.norm = nn::NormKind::layer;
  m.norm_eps = c.number("layer_norm_epsilon", 1e-5);
  m.activation = gelu_kind(c, "activation_function", "gelu_new");
  m.positions = nn::PositionKind::learned;
  m.attn_scale = nn::AttnScale::none;
  m.bias = true;
  if (!c.boolean("tie_word_embeddings", true)) bad(c.path + ": tie_word_embeddings: false is not supported");
  m.tie_embeddings = true;
  // attention_types: [[["global", "local"], 12]] is 12 repetitions of the pair.
  json windows = json::array();
  const int64_t window = c.integer("window_size", 256);
  const json& types = c.j.contains("attention_types") ? c.j["attention_types"] : json(nullptr);
  if (!types.is_array())
    bad(c.path + ": attention_types: missing, expected [[[\"global\", \"local\"], n], ...]");
  for (const json& item : types) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() || !item[1].is_number_unsigned())
      bad(c.path + ": attention_types: expected [[[\"global\", \"local\"], n], ...], got " + item.dump());
    for (uint64_t r = 0; r < item[1].get<uint64_t>() && windows.size() <= static_cast<size_t>(m.n_layers);
         ++r)
      for (const json& kind : item[0]) {
        if (kind != "global" && kind != "local")
          bad(c.path + ": attention_types: " + kind.dump() + " is not global or local");
        windows.push_back(kind == "local" ? window : 0);
      }
  }
  if (windows.size() != static_cast<size_t>(m.n_layers))
    bad(c.path + ": attention_types: " + std::to_string(windows.size()) + " layers, but num_layers is " +
        std::to_string(m.n_layers));
  bool any_local = false;
  for (const json& w : windows) any_local = any_local || w != 0;
  if (any_local) {
    p.model_fields["attn_window"] = windows;
  }

  const std::string pre = s.has("transformer.wte.weight") ? "transformer." : "";
  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab;
  p.add("tok_emb.weight", {V, D}, copy_of(s, pre + "wte.weight", {V, D}));
  p.add("pos_emb.weight", {p.max_len, D}, copy_of(s, pre + "wpe.weight", {p.max_len, D}));
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string h = pre + "h." + std::to_string(l) + ".", b = "blocks." + std::to_string(l) + ".";
    const std::string a = h + "attn.attention.";
    p.add(b + "ln1.weight", {D}, copy_of(s, h + "ln_1.weight", {D}));
    p.add(b + "ln1.bias", {D}, copy_of(s, h + "ln_1.bias", {D}));
    p.add(b + "attn.wq.weight", {D, D}, copy_of(s, a + "q_proj.weight", {D, D}));
    p.add(b + "attn.wq.bias", {D}, zeros());  // GPT-Neo's q, k and v have none
    p.add(b + "attn.wk.weight", {D, D}, copy_of(s, a + "k_proj.weight", {D, D}));
    p.add(b + "attn.wk.bias", {D}, zeros());
    p.add(b + "attn.wv.weight", {D, D}, copy_of(s, a + "v_proj.weight", {D, D}));
    p.add(b + "attn.wv.bias", {D}, zeros());
    p.add(b + "attn.wo.weight", {D, D}, copy_of(s, a + "out_proj.weight", {D, D}));
    p.add(b + "attn.wo.bias", {D}, copy_of(s, a + "out_proj.bias", {D}));
    p.add(b + "ln2.weight", {D}, copy_of(s, h + "ln_2.weight", {D}));
    p.add(b + "ln2.bias", {D}, copy_of(s, h + "ln_2.bias", {D}));
    p.add(b + "mlp.fc1.weight", {F, D}, copy_of(s, h + "mlp.c_fc.weight", {F, D}));
    p.add(b + "mlp.fc1.bias", {F}, copy_of(s, h + "mlp.c_fc.bias", {F}));
    p.add(b + "mlp.fc2.weight", {D, F}, copy_of(s, h + "mlp.c_proj.weight", {D, F}));
    p.add(b + "mlp.fc2.bias", {D}, copy_of(s, h + "mlp.c_proj.bias", {D}));
  }
  p.add("ln_f.weight", {D}, copy_of(s, pre + "ln_f.weight", {D}));
  p.add("ln_f.bias", {D}, copy_of(s, pre + "ln_f.bias", {D}));
  p.add("lm_head.bias", {V}, zeros());
  p.ignorable = [](const std::string& n) {
    return ends_with(n, ".attn.attention.bias") || ends_with(n, ".attn.attention.masked_bias") ||
           n == "lm_head.weight";
  };
  return p;
}

// The attention window of each layer of a Mistral or Qwen2 config (empty: every layer global), in
// transformers' terms: a sliding layer's query i sees keys i - sliding_window < j <= i.
// Mistral (configuration_mistral.py): sliding_window, null or absent for none, on every layer.
// Qwen2 (configuration_qwen2.py): sliding_window only when use_sliding_window; layer_types when given,
// else the layers from max_window_layers on slide.
json windows_of(const HfConfig& c, const std::string& family, int64_t n_layers) {
  if (family == "mistral")
    return c.has("sliding_window") ? json::array({c.integer("sliding_window")}) : json();
  if (family != "qwen2") return json();
  const int64_t window =
      c.boolean("use_sliding_window", false) && c.has("sliding_window") ? c.integer("sliding_window") : 0;
  json windows = json::array();
  if (c.has("layer_types")) {
    const json& types = c.j["layer_types"];
    if (!types.is_array() || types.size() != static_cast<size_t>(n_layers))
      bad(c.path + ": layer_types: expected one of \"full_attention\" or \"sliding_attention\" per layer (" +
          std::to_string(n_layers) + "), got " + types.dump());
    for (const json& t : types) {
      if (t != "full_attention" && t != "sliding_attention")
        bad(c.path + ": layer_types: " + t.dump() +
            " is not supported (\"full_attention\" or \"sliding_attention\")");
      windows.push_back(t == "sliding_attention" ? window : 0);
    }
  } else {
    const int64_t from = c.has("max_window_layers") ? c.integer("max_window_layers") : 28;
    for (int64_t l = 0; l < n_layers; ++l) windows.push_back(window > 0 && l >= from ? window : 0);
  }
  for (const json& w : windows)
    if (w != 0) return windows;
  return json();
}

// Llama (modeling_llama.py) and the families that share its layout: Mistral (modeling_mistral.py: a
// sliding window) and Qwen2/Qwen2.5 (modeling_qwen2.py: q, k and v biases without an output bias, sliding
// layers).
Plan plan_llama(const HfConfig& c, Source& s, const std::string& family) {
  Plan p = plan_with_dimensions(c, kHiddenSizeDimensions);
  nn::ModelShape& m = p.shape;
  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab, H = m.n_heads;
  if (D % H != 0)
    bad(c.path + ": num_attention_heads: " + std::to_string(H) + " does not divide hidden_size");
  if (c.integer("head_dim", D / H) != D / H)
    bad(c.path + ": head_dim: " + std::to_string(c.integer("head_dim")) +
        " is not supported (attograd's heads are hidden_size / num_attention_heads)");
  const int64_t KV = c.integer("num_key_value_heads", H), dk = D / H;
  if (H % KV != 0)
    bad(c.path + ": num_key_value_heads: " + std::to_string(KV) + " does not divide num_attention_heads");
  if (KV != H) {
    p.model_fields["n_kv_heads"] = KV;  // query head h reads kv head h / (H / KV), as transformers' repeat_kv
  }
  const json windows = windows_of(c, family, m.n_layers);
  if (!windows.is_null()) p.model_fields["attn_window"] = windows;
  m.norm = nn::NormKind::rms;
  m.norm_eps = c.number("rms_norm_eps", 1e-6);
  c.expect("hidden_act", "silu", "silu");
  m.activation = nn::Activation::swiglu;
  m.positions = nn::PositionKind::rotary;
  const Rotary rotary = rotary_of(c, {"rope_theta"}, {10000, 1.0}, {"partial_rotary_factor"});
  if (rotary.fraction != 1.0)
    bad(c.path + ": partial_rotary_factor: " + std::to_string(rotary.fraction) + " is not supported (" +
        family + " rotates the whole head)");
  m.rotary_fraction = 1.0;
  m.rotary_base = rotary.base;
  if (c.boolean("attention_bias", false)) bad(c.path + ": attention_bias: true is not supported");
  if (c.boolean("mlp_bias", false)) bad(c.path + ": mlp_bias: true is not supported");
  m.bias = false;
  m.qkv_bias = family == "qwen2";  // Qwen2's q_proj, k_proj and v_proj always have biases, o_proj none
  m.tie_embeddings = c.boolean("tie_word_embeddings", false);

  p.add("tok_emb.weight", {V, D}, copy_of(s, "model.embed_tokens.weight", {V, D}));
  for (int64_t l = 0; l < m.n_layers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".", b = "blocks." + std::to_string(l) + ".";
    p.add(b + "ln1.weight", {D}, copy_of(s, h + "input_layernorm.weight", {D}));
    const std::vector<std::pair<std::string, int64_t>> qkv = {{"q", D}, {"k", KV * dk}, {"v", KV * dk}};
    for (const auto& [n, rows] : qkv) {
      p.add(b + "attn.w" + n + ".weight", {rows, D},
            copy_of(s, h + "self_attn." + n + "_proj.weight", {rows, D}));
      if (m.qkv_bias)
        p.add(b + "attn.w" + n + ".bias", {rows}, copy_of(s, h + "self_attn." + n + "_proj.bias", {rows}));
    }
    p.add(b + "attn.wo.weight", {D, D}, copy_of(s, h + "self_attn.o_proj.weight", {D, D}));
    p.add(b + "ln2.weight", {D}, copy_of(s, h + "post_attention_layernorm.weight", {D}));
    p.add(b + "mlp.fc1.weight", {F, D}, copy_of(s, h + "mlp.up_proj.weight", {F, D}));
    p.add(b + "mlp.gate.weight", {F, D}, copy_of(s, h + "mlp.gate_proj.weight", {F, D}));
    p.add(b + "mlp.fc2.weight", {D, F}, copy_of(s, h + "mlp.down_proj.weight", {D, F}));
  }
  p.add("ln_f.weight", {D}, copy_of(s, "model.norm.weight", {D}));
  if (!m.tie_embeddings) p.add("lm_head.weight", {V, D}, copy_of(s, "lm_head.weight", {V, D}));
  p.ignorable = [tied = m.tie_embeddings](const std::string& n) {
    return ends_with(n, ".rotary_emb.inv_freq") || (tied && n == "lm_head.weight");
  };
  return p;
}

// The family config.json names, or the one asked for.
std::string family_of(const HfConfig& c, const std::string& asked) {
  const std::string type = c.string("model_type", "");
  std::string family = asked;
  if (asked == "auto") {
    if (type.empty()) bad(c.path + ": model_type: missing; give --family");
    family = type;
  }
  if (family != "gpt2" && family != "gpt_neo" && family != "gpt_neox" && family != "llama" &&
      family != "mistral" && family != "qwen2")
    bad(c.path + ": model_type: \"" + family + "\" is not a family attograd imports (gpt2, gpt_neo, " +
        "gpt_neox, llama, mistral, qwen2)");
  return family;
}

// The window of an imported run's text task (request.text): sequences its tools draw, at most max_len.
constexpr int64_t kImportedTextWindow = 256;

// The task section of an imported run. A run needs a task for its token names and its input length; an
// imported model has no data. A character-level model (chars.txt, from scripts/import_nanogpt.py) gets a
// text task over its characters, which numbers them as nanoGPT does (sorted); with a byte-level BPE
// tokenizer (`bpe`: "tokenizer.json", or "." for GPT-2's vocab.json + merges.txt read from the run folder
// itself) the task is the "pretrained" kind over the copied tokenizer, or, given a text (`text`, absolute),
// a text task over that file encoded by the copied tokenizer (`tokenizer`, absolute); without either, a
// random-token task over the model's vocabulary stands in (ids in, ids out).
json task_section(int64_t vocab, int64_t max_len, const std::string& bpe, const std::string& chars,
                  const std::string& text, const std::string& tokenizer) {
  if (!chars.empty()) return {{"kind", "text"}, {"path", chars}, {"unit", "char"}, {"length", max_len}};
  if (!bpe.empty() && !text.empty())
    return {{"kind", "text"},
            {"path", text},
            {"unit", "bpe"},
            {"tokenizer", tokenizer},
            {"length", std::min(max_len, kImportedTextWindow)}};
  if (!bpe.empty()) return {{"kind", "pretrained"}, {"tokenizer", bpe}};
  return {{"kind", "random"}, {"vocab", vocab}, {"length", std::min<int64_t>(max_len, 1024)}};
}

}  // namespace

analysis::Output<findings::ImportReport> import_model(const ImportRequest& request) {
  if (request.src.empty()) throw analysis::RequestError("src: expected a Hugging Face model folder");
  if (request.out.empty()) throw analysis::RequestError("out: expected the run folder to write");
  const std::string src = fs::absolute(request.src).lexically_normal().string();
  if (!fs::is_directory(src)) throw analysis::RequestError("src: " + request.src + ": not a folder");
  const std::string out = request.out;
  if (fs::exists(out) && (!fs::is_directory(out) || !fs::is_empty(out)))
    throw analysis::RequestError("out: " + out + ": exists and is not an empty folder; give a new folder");

  HfConfig hf{src + "/config.json", io::load_json_file(src + "/config.json")};
  if (!hf.j.is_object()) bad(hf.path + ": expected a JSON object");
  const std::string family = family_of(hf, request.family);
  Source source(src);
  Plan plan = family == "gpt2"       ? plan_gpt2(hf, source)
              : family == "gpt_neo"  ? plan_gpt_neo(hf, source)
              : family == "gpt_neox" ? plan_gpt_neox(hf, source)
                                     : plan_llama(hf, source, family);

  // The tokenizer files there are, copied as they are.
  std::vector<std::string> tokenizer_files;
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json",
                           "special_tokens_map.json", "chars.txt"})
    if (fs::is_regular_file(src + "/" + name)) tokenizer_files.push_back(name);
  const auto has = [&](const char* name) {
    return std::find(tokenizer_files.begin(), tokenizer_files.end(), name) != tokenizer_files.end();
  };
  // The byte-level BPE tokenizer: tokenizer.json, else GPT-2's pair (train::Tokenizer::load reads a folder
  // holding vocab.json and merges.txt and no tokenizer.json as the pair).
  const std::string bpe = has("tokenizer.json")                    ? "tokenizer.json"
                          : has("vocab.json") && has("merges.txt") ? "."
                                                                   : "";

  // The config in attograd's schema, validated and resolved as a config file is.
  train::Config config;
  config.name = fs::path(out).filename().string().empty() ? "imported" : fs::path(out).filename().string();
  config.model = plan.shape;
  config.model.max_len = plan.max_len;
  config.output.dir = out;
  // A model to study one sequence at a time: the training settings that size memory (the config's estimate
  // counts a training step's) are the smallest, for a fine-tuning config to raise.
  config.train.batch_size = 1;
  config.train.eval_size = 16;
  config.output.probes = 1;
  json document = train::to_json(config);
  for (const auto& [key, value] : plan.model_fields.items()) document["model"][key] = value;
  const bool has_chars = has("chars.txt");
  const std::string chars = has_chars ? fs::absolute(out + "/chars.txt").lexically_normal().string() : "";
  std::string text;
  if (!request.text.empty()) {
    if (bpe.empty() || has_chars)
      throw analysis::RequestError("text: " + request.text +
                                   ": a text needs the model's byte-level BPE tokenizer (" + src +
                                   "/tokenizer.json, or vocab.json and merges.txt), which this folder does "
                                   "not have");
    if (!fs::is_regular_file(request.text))
      throw analysis::RequestError("text: " + request.text + ": not a file");
    text = fs::absolute(request.text).lexically_normal().string();
  }
  document["task"] = task_section(plan.shape.vocab, plan.max_len, bpe, chars, text,
                                  fs::absolute(out + "/" + bpe).lexically_normal().string());

  io::check_new_run_folder(out);
  const bool created = !fs::exists(out);
  findings::ImportReport report;
  try {
    fs::create_directories(out);
    io::RunLock lock(out);
    io::mark_run_folder(out);
    fs::create_directories(io::layout::checkpoint_dir(out));
    // The tokenizer files first: a text task reads its characters when its config is checked.
    for (const std::string& name : tokenizer_files)
      io::write_text_file_atomically(out + "/" + name,
                                     io::read_text_file(src + "/" + name, size_t(64) << 20));
    config = train::from_json(document, hf.path + " (as attograd's config)");
    (void)train::make_task(config.task, config.seed, out);  // opens as every reading tool will open it
    io::write_text_file_atomically(io::layout::config_json(out), train::to_json(config).dump(2) + "\n");
    const std::map<std::string, std::string> metadata = {{"config", train::to_json(config).dump()},
                                                         {"step", "0"}};
    train::write_safetensors_streamed(io::layout::model_checkpoint(out), plan.specs, metadata,
                                      [&](size_t i, std::vector<float>& values) { plan.fills[i](values); });
    source.check_all_used(plan.ignorable);
    if (request.process) {
      // The checkpoint just written, read back as every tool reads it, processed and written over itself
      // with its config untied (the processed copy always is).
      const auto model = train::make_model_to_load<float>(config);
      train::load_model_checkpoint(io::layout::model_checkpoint(out), *model);
      const auto processed =
          analysis::processed_weights(*model, analysis::all_processing(), &report.processing);
      config.model.tie_embeddings = false;
      io::write_text_file_atomically(io::layout::config_json(out), train::to_json(config).dump(2) + "\n");
      std::vector<train::TensorSpec> specs;
      const auto params = processed->named_parameters();
      for (const auto& p : params) specs.push_back({p.name, p.tensor->shape()});
      train::write_safetensors_streamed(
          io::layout::model_checkpoint(out), specs,
          {{"config", train::to_json(config).dump()}, {"step", "0"}},
          [&](size_t i, std::vector<float>& values) { values = params[i].tensor->to_vector(); });
      plan.specs = specs;
    }

    report.family = family;
    report.source = src;
    report.run = out;
    report.source_files = source.file_names();
    report.dtypes = source.dtypes();
    report.tokenizer_files = tokenizer_files;
    for (const auto& spec : plan.specs) {
      int64_t n = 1;
      for (int64_t d : spec.shape) n *= d;
      report.params += n;
    }
    io::write_text_file_atomically(io::layout::imported_json(out),
                                   findings::import_to_json(report).dump(2) + "\n");
  } catch (...) {
    // A half-written import is no run: the folder goes back to how it was (new or empty).
    std::error_code ec;
    if (created) {
      fs::remove_all(out, ec);
    } else {
      for (const auto& entry : fs::directory_iterator(out, ec)) fs::remove_all(entry.path(), ec);
    }
    throw;
  }
  analysis::Output<findings::ImportReport> output;
  output.result = report;
  output.wrote = {io::layout::config_json(out), io::layout::model_checkpoint(out),
                  io::layout::imported_json(out)};
  for (const std::string& name : tokenizer_files) output.wrote.push_back(out + "/" + name);
  return output;
}

}  // namespace imports
