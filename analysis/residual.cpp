// The logit lens and the residual decomposition (see residual.h).
#include "analysis/residual.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "nn/model_view.h"
namespace analysis {
namespace {

std::string head_name(int layer, int head) {
  return nn::block_prefix(static_cast<size_t>(layer)) + "attn.head." + std::to_string(head);
}
std::string attn_bias_name(int layer) {
  return nn::block_prefix(static_cast<size_t>(layer)) + "attn.bias";
}
std::string mlp_name(int layer) {
  return nn::block_prefix(static_cast<size_t>(layer)) + "mlp";
}

}  // namespace

std::vector<std::string> lens_component_names(const nn::ModelShape& shape) {
  std::vector<std::string> out = {"embed"};
  if (nn::has_pos_emb(shape.positions)) out.push_back("pos_embed");  // rotary and none have no pos_emb
  for (int l = 0; l < shape.n_layers; ++l) {
    for (int h = 0; h < shape.n_heads; ++h) out.push_back(head_name(l, h));
    if (shape.bias) out.push_back(attn_bias_name(l));
    if (!shape.attention_only) out.push_back(mlp_name(l));
  }
  if (nn::norm_has_bias(shape.norm)) out.push_back("ln_f.bias");
  if (shape.bias) out.push_back("lm_head.bias");
  return out;
}

template <typename T>
findings::LensResult logit_lens(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int answer,
                                int wrong) {
  const int64_t V = model.shape.vocab, D = model.shape.d_model, H = model.shape.n_heads, dk = D / H;
  const nn::ModelView<T> mv = nn::view(model);
  const int L = static_cast<int>(mv.layers.size());
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 1 || n > model.shape.max_len)
    throw std::invalid_argument("lens: " + std::to_string(n) + " tokens; the model takes 1.." +
                                std::to_string(model.shape.max_len));
  for (int32_t id : ids)
    if (id < 0 || id >= V)
      throw std::invalid_argument("lens: token id " + std::to_string(id) + " outside the vocabulary 0.." +
                                  std::to_string(V - 1));
  if (answer < 0 || answer >= V || wrong < -1 || wrong >= V)
    throw std::invalid_argument("lens: answer " + std::to_string(answer) + " / wrong " +
                                std::to_string(wrong) + " outside the vocabulary 0.." +
                                std::to_string(V - 1));
  if (answer == wrong)
    throw std::invalid_argument("lens: answer and wrong are the same token (id " + std::to_string(answer) +
                                "); the metric would be 0");

  // One reference forward, capturing what the lens reads.
  ag::NoGradScope no_grad;
  nn::Hooks<T> hooks;
  std::vector<std::string> points;
  for (int l = 0; l < L; ++l) points.push_back(nn::hook_name(nn::Point::resid_pre, l));
  points.push_back(nn::hook_name(nn::Point::resid_post, L - 1));
  for (const std::string& p : points) hooks.capture(p);
  const nn::NormView<T>& final_norm = mv.final_read.norm;
  const std::string final_scale = nn::hook_name(final_norm.scale_point);
  if (final_norm.normalises) hooks.capture(final_scale);
  for (int l = 0; l < L; ++l) {
    hooks.capture(nn::hook_name(nn::Point::attn_z, l));
    if (!model.shape.attention_only) hooks.capture(nn::hook_name(nn::Point::mlp_out, l));
  }
  const ag::Tensor<T> logits = model.forward(ids, 1, n, {}, &hooks);

  // u (V) and W_U^T u (D), in double.
  std::vector<double> u(static_cast<size_t>(V), wrong < 0 ? -1.0 / double(V) : 0.0);
  u[answer] += 1.0;
  if (wrong >= 0) u[wrong] -= 1.0;
  const T* Wu = mv.unembed.weight.data();  // (V, D)
  std::vector<double> dir(static_cast<size_t>(D), 0.0);
  for (int64_t w = 0; w < V; ++w)
    if (u[w] != 0.0)
      for (int64_t d = 0; d < D; ++d) dir[d] += u[w] * double(Wu[w * D + d]);
  double bias_ln = 0, bias_lm = 0;
  if (final_norm.bias.defined())
    for (int64_t d = 0; d < D; ++d) bias_ln += double(final_norm.bias.data()[d]) * dir[d];
  if (mv.unembed.has_bias())
    for (int64_t w = 0; w < V; ++w) bias_lm += double(mv.unembed.bias.data()[w]) * u[w];

  findings::LensResult r;
  r.answer = answer;
  r.wrong = wrong;
  const std::vector<std::string> names = lens_component_names(model.shape);
  const int64_t n_comp = static_cast<int64_t>(names.size());
  std::vector<std::vector<double>> comp(static_cast<size_t>(n_comp), std::vector<double>(n, 0.0));
  std::vector<std::vector<double>> acc(points.size(), std::vector<double>(n, 0.0));
  auto dot = [D](const T* x, const std::vector<double>& g) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += double(x[d]) * g[d];
    return s;
  };
  const T* scale = final_norm.normalises ? hooks.captured(final_scale).data() : nullptr;
  const T* weight = final_norm.weight.defined() ? final_norm.weight.data() : nullptr;
  for (int64_t t = 0; t < n; ++t) {
    // g_c(t): the final norm's scale and weight times the direction, centred when it centres (the direction
    // itself with the identity norm).
    std::vector<double> g(dir);
    if (scale) {
      double mean = 0;
      for (int64_t d = 0; d < D; ++d) {
        g[d] = double(scale[t]) * (weight ? double(weight[d]) : 1.0) * dir[d];
        mean += g[d] / double(D);
      }
      if (final_norm.centres)
        for (double& x : g) x -= mean;
    }
    for (size_t p = 0; p < points.size(); ++p)
      acc[p][t] = dot(hooks.captured(points[p]).data() + t * D, g) + bias_ln + bias_lm;
    size_t c = 0;
    comp[c++][t] = dot(mv.token_embedding.data() + int64_t(ids[t]) * D, g);
    if (mv.position_embedding.defined()) comp[c++][t] = dot(mv.position_embedding.data() + t * D, g);
    for (int l = 0; l < L; ++l) {
      const nn::LinearView<T>& wo = mv.layers[l].attn_out.writer;
      const T* Wo = wo.weight.data();  // (D out, D in); head h reads input columns [h*dk, (h+1)*dk)
      // Wo^T g_c: what each input column of Wo (each head's z element) contributes per unit.
      std::vector<double> back(static_cast<size_t>(D), 0.0);
      for (int64_t o = 0; o < D; ++o)
        for (int64_t i = 0; i < D; ++i) back[i] += double(Wo[o * D + i]) * g[o];
      const T* z = hooks.captured(nn::hook_name(nn::Point::attn_z, l)).data() + t * D;  // (H, dk) at t
      for (int64_t h = 0; h < H; ++h) {
        double s = 0;
        for (int64_t j = 0; j < dk; ++j) s += double(z[h * dk + j]) * back[h * dk + j];
        comp[c++][t] = s;
      }
      if (wo.has_bias()) comp[c++][t] = dot(wo.bias.data(), g);
      if (mv.layers[l].has_mlp)
        comp[c++][t] = dot(hooks.captured(nn::hook_name(nn::Point::mlp_out, l)).data() + t * D, g);
    }
    if (final_norm.bias.defined()) comp[c++][t] = bias_ln;
    if (mv.unembed.has_bias()) comp[c++][t] = bias_lm;
    const T* row = logits.data() + t * V;
    double m = 0;
    for (int64_t v = 0; v < V; ++v) m += u[v] * double(row[v]);
    // Soft-capped logits are not linear in the stream: the metric is read before the cap, where the last
    // resid_post's value is exact.
    r.actual.push_back(model.shape.logit_softcap > 0 ? acc.back()[t] : m);
  }
  for (size_t p = 0; p < points.size(); ++p)
    for (int64_t t = 0; t < n; ++t) r.accumulated.push_back({points[p], static_cast<int>(t), acc[p][t]});
  for (int64_t c = 0; c < n_comp; ++c)
    for (int64_t t = 0; t < n; ++t) r.components.push_back({names[c], static_cast<int>(t), comp[c][t]});
  return r;
}

namespace {

void check_layer(const nn::ModelShape& shape, int layer) {
  if (layer < 0 || layer > shape.n_layers)
    throw std::invalid_argument("layer: expected 0.." + std::to_string(shape.n_layers) + " (" +
                                std::to_string(shape.n_layers) +
                                ": every block and the final residual), got " + std::to_string(layer));
}

// Rows (B, T, D) copied into one (n, B, T, D) stack in double; every row of one shape.
class StackBuilder {
 public:
  explicit StackBuilder(int64_t d_model) : D_(d_model) {}

  template <typename T>
  void add(const std::string& label, const std::string& point, const ag::Tensor<T>& x) {
    if (x.dim() != 3 || x.size(2) != D_ || (!labels_.empty() && (x.size(0) != B_ || x.size(1) != T_)))
      throw std::invalid_argument(point + ": expected shape (B, T, " + std::to_string(D_) + ")" +
                                  (labels_.empty() ? ""
                                                   : " with B " + std::to_string(B_) + ", T " +
                                                         std::to_string(T_) + " as the cache's others") +
                                  ", got " + ag::shape_str(x.shape()));
    start(label, x.size(0), x.size(1));
    const T* v = x.data();
    for (int64_t i = 0; i < B_ * T_ * D_; ++i) data_.push_back(double(v[i]));
  }
  // A row to fill: B * T * D doubles.
  double* add_row(const std::string& label, int64_t B, int64_t T) {
    start(label, B, T);
    data_.resize(data_.size() + static_cast<size_t>(B * T * D_), 0.0);
    return data_.data() + data_.size() - static_cast<size_t>(B * T * D_);
  }
  ResidualStack done() {
    ResidualStack out;
    const int64_t n = static_cast<int64_t>(labels_.size());
    out.stack = ag::Tensor<double>::empty({n, B_, T_, D_});
    std::copy(data_.begin(), data_.end(), out.stack.data());
    out.labels = std::move(labels_);
    return out;
  }

 private:
  void start(const std::string& label, int64_t B, int64_t T) {
    if (labels_.empty()) B_ = B, T_ = T;
    labels_.push_back(label);
  }
  int64_t D_, B_ = 0, T_ = 0;
  std::vector<std::string> labels_;
  std::vector<double> data_;
};

std::string point(nn::Point p, int layer) {
  return nn::hook_name(p, static_cast<size_t>(layer));
}

}  // namespace

template <typename T>
ResidualStack accumulated_resid(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer,
                                bool incl_mid, bool mlp_input) {
  const int L = model.shape.n_layers;
  check_layer(model.shape, layer);
  StackBuilder b(model.shape.d_model);
  for (int l = 0; l <= layer; ++l) {
    if (l == L) {
      b.add("final_post", point(nn::Point::resid_post, L - 1), cache(point(nn::Point::resid_post, L - 1)));
      break;
    }
    b.add(std::to_string(l) + "_pre", point(nn::Point::resid_pre, l), cache(point(nn::Point::resid_pre, l)));
    if ((incl_mid && l < layer) || (mlp_input && l == layer))
      b.add(std::to_string(l) + "_mid", point(nn::Point::resid_mid, l),
            cache(point(nn::Point::resid_mid, l)));
  }
  return b.done();
}

template <typename T>
ResidualStack decompose_resid(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer,
                              bool mlp_input, const std::string& mode, bool incl_embeds) {
  check_layer(model.shape, layer);
  if (mode != "all" && mode != "attn" && mode != "mlp")
    throw std::invalid_argument("mode: expected \"all\", \"attn\" or \"mlp\", got \"" + mode + "\"");
  if (mlp_input && layer == model.shape.n_layers)
    throw std::invalid_argument("mlp_input: layer " + std::to_string(layer) +
                                " has no MLP input (the last block is " + std::to_string(layer - 1) + ")");
  const bool attn = mode != "mlp", mlp = mode != "attn" && !model.shape.attention_only;
  StackBuilder b(model.shape.d_model);
  if (incl_embeds) {
    b.add("embed", "embed", cache("embed"));
    b.add("pos_embed", "pos_embed", cache("pos_embed"));
  }
  for (int l = 0; l < layer; ++l) {
    if (attn)
      b.add(std::to_string(l) + "_attn_out", point(nn::Point::attn_out, l),
            cache(point(nn::Point::attn_out, l)));
    if (mlp)
      b.add(std::to_string(l) + "_mlp_out", point(nn::Point::mlp_out, l),
            cache(point(nn::Point::mlp_out, l)));
  }
  if (mlp_input && attn)
    b.add(std::to_string(layer) + "_attn_out", point(nn::Point::attn_out, layer),
          cache(point(nn::Point::attn_out, layer)));
  return b.done();
}

template <typename T>
ResidualStack stack_head_results(const nn::CausalLM<T>& model, const CacheLookup<T>& cache, int layer) {
  check_layer(model.shape, layer);
  const int64_t D = model.shape.d_model, H = model.shape.n_heads, dk = D / H;
  const nn::ModelView<T> mv = nn::view(model);
  StackBuilder b(D);
  for (int l = 0; l < layer; ++l) {
    const std::string name = point(nn::Point::attn_z, l);
    const ag::Tensor<T> z = cache(name);  // (B, T, H, dk)
    if (z.dim() != 4 || z.size(2) != H || z.size(3) != dk)
      throw std::invalid_argument(name + ": expected shape (B, T, " + std::to_string(H) + ", " +
                                  std::to_string(dk) + "), got " + ag::shape_str(z.shape()));
    const int64_t B = z.size(0), n = z.size(1);
    const T* Wo = mv.layers[l].attn_out.writer.weight.data();  // (D out, D in); head h: columns h*dk..
    for (int64_t h = 0; h < H; ++h) {
      double* out = b.add_row("L" + std::to_string(l) + "H" + std::to_string(h), B, n);
      for (int64_t r = 0; r < B * n; ++r) {
        const T* zr = z.data() + (r * H + h) * dk;
        for (int64_t o = 0; o < D; ++o) {
          double s = 0;
          for (int64_t j = 0; j < dk; ++j) s += double(zr[j]) * double(Wo[o * D + h * dk + j]);
          out[r * D + o] = s;
        }
      }
    }
  }
  if (layer == 0) return ResidualStack{{}, ag::Tensor<double>::empty({0, 0, 0, D})};
  return b.done();
}

template <typename T>
ag::Tensor<double> apply_ln_to_stack(const nn::CausalLM<T>& model, const CacheLookup<T>& cache,
                                     const ag::Tensor<double>& stack, int layer, bool mlp_input) {
  check_layer(model.shape, layer);
  const int L = model.shape.n_layers;
  const int64_t D = model.shape.d_model;
  if (mlp_input && (layer == L || model.shape.attention_only))
    throw std::invalid_argument("mlp_input: " + std::string(layer == L ? "ln_f" : "an attention-only block") +
                                " has no MLP input norm");
  const nn::ModelView<T> mv = nn::view(model);
  const nn::NormView<T> norm = layer == L  ? mv.final_read.norm
                               : mlp_input ? mv.layers[layer].mlp_in.norm
                                           : mv.layers[layer].attn_in.norm;
  const nn::Point scale_point = norm.scale_point;
  if (stack.dim() < 3 || stack.size(-1) != D)
    throw std::invalid_argument("residual_stack: expected shape (..., B, T, " + std::to_string(D) +
                                "), got " + ag::shape_str(stack.shape()));
  ag::Tensor<double> out = ag::Tensor<double>::empty(stack.shape());
  std::copy(stack.data(), stack.data() + stack.numel(), out.data());
  if (!norm.normalises) return out;
  const std::string name = point(scale_point, layer);
  const ag::Tensor<T> scale = cache(name);  // (B, T, 1)
  const int64_t B = stack.size(-3), n = stack.size(-2);
  if (scale.dim() != 3 || scale.size(0) != B || scale.size(1) != n || scale.size(2) != 1)
    throw std::invalid_argument("residual_stack: shape " + ag::shape_str(stack.shape()) + " does not match " +
                                name + "'s " + ag::shape_str(scale.shape()) +
                                " (expected (..., B, T, D) of (B, T, 1))");
  const T* w = norm.weight.defined() ? norm.weight.data() : nullptr;
  double* x = out.data();
  for (int64_t r = 0; r < stack.numel() / D; ++r, x += D) {
    double mean = 0;
    if (norm.centres) {
      for (int64_t d = 0; d < D; ++d) mean += x[d];
      mean /= double(D);
    }
    const double s = double(scale.data()[r % (B * n)]);
    for (int64_t d = 0; d < D; ++d) x[d] = (x[d] - mean) * s * (w ? double(w[d]) : 1.0);
  }
  return out;
}

template <typename T>
ag::Tensor<double> logit_attrs(const nn::CausalLM<T>& model, const ag::Tensor<double>& stack, int token,
                               int incorrect) {
  const int64_t V = model.shape.vocab, D = model.shape.d_model;
  if (token < 0 || token >= V)
    throw std::invalid_argument("tokens: token id " + std::to_string(token) + " outside the vocabulary 0.." +
                                std::to_string(V - 1));
  if (incorrect < -1 || incorrect >= V)
    throw std::invalid_argument("incorrect_tokens: token id " + std::to_string(incorrect) +
                                " outside the vocabulary 0.." + std::to_string(V - 1));
  if (stack.dim() < 1 || stack.size(-1) != D)
    throw std::invalid_argument("residual_stack: expected shape (..., " + std::to_string(D) + "), got " +
                                ag::shape_str(stack.shape()));
  const nn::ModelView<T> mv = nn::view(model);
  const T* Wu = mv.unembed.weight.data();  // (V, D)
  std::vector<double> dir(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d)
    dir[d] = double(Wu[token * D + d]) - (incorrect >= 0 ? double(Wu[incorrect * D + d]) : 0.0);
  ag::Shape shape(stack.shape().begin(), stack.shape().end() - 1);
  ag::Tensor<double> out = ag::Tensor<double>::empty(shape);
  const double* x = stack.data();
  for (int64_t r = 0; r < out.numel(); ++r, x += D) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += x[d] * dir[d];
    out.data()[r] = s;
  }
  return out;
}

#define ATTOGRAD_INSTANTIATE(T)                                                                         \
  template ResidualStack accumulated_resid<T>(const nn::CausalLM<T>&, const CacheLookup<T>&, int, bool, \
                                              bool);                                                    \
  template ResidualStack decompose_resid<T>(const nn::CausalLM<T>&, const CacheLookup<T>&, int, bool,   \
                                            const std::string&, bool);                                  \
  template ResidualStack stack_head_results<T>(const nn::CausalLM<T>&, const CacheLookup<T>&, int);     \
  template ag::Tensor<double> apply_ln_to_stack<T>(const nn::CausalLM<T>&, const CacheLookup<T>&,       \
                                                   const ag::Tensor<double>&, int, bool);               \
  template ag::Tensor<double> logit_attrs<T>(const nn::CausalLM<T>&, const ag::Tensor<double>&, int, int);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

template findings::LensResult logit_lens<float>(const nn::CausalLM<float>&, const std::vector<int32_t>&, int,
                                                int);
template findings::LensResult logit_lens<double>(const nn::CausalLM<double>&, const std::vector<int32_t>&,
                                                 int, int);

}  // namespace analysis
