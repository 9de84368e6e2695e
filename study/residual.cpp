// The logit lens and the residual decomposition (see residual.h).
#include "study/residual.h"

#include <stdexcept>
#include <string>

namespace study {
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
  std::vector<std::string> out = {"embed", "pos_embed"};
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
  const int L = static_cast<int>(model.blocks.size());
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
  const nn::Norm<T>& ln_f = *model.ln_f;
  const std::string ln_f_scale = nn::hook_name(nn::Point::ln_f_scale);
  if (ln_f.normalises()) hooks.capture(ln_f_scale);
  for (int l = 0; l < L; ++l) {
    hooks.capture(nn::hook_name(nn::Point::attn_z, l));
    if (!model.shape.attention_only) hooks.capture(nn::hook_name(nn::Point::mlp_out, l));
  }
  const ag::Tensor<T> logits = model.forward(ids, 1, n, {}, &hooks);

  // u (V) and W_U^T u (D), in double.
  std::vector<double> u(static_cast<size_t>(V), wrong < 0 ? -1.0 / double(V) : 0.0);
  u[answer] += 1.0;
  if (wrong >= 0) u[wrong] -= 1.0;
  const T* Wu = model.lm_head.weight.data();  // (V, D)
  std::vector<double> dir(static_cast<size_t>(D), 0.0);
  for (int64_t v = 0; v < V; ++v)
    if (u[v] != 0.0)
      for (int64_t d = 0; d < D; ++d) dir[d] += u[v] * double(Wu[v * D + d]);
  double bias_ln = 0, bias_lm = 0;
  if (ln_f.bias.defined())
    for (int64_t d = 0; d < D; ++d) bias_ln += double(ln_f.bias.data()[d]) * dir[d];
  if (model.lm_head.bias.defined())
    for (int64_t v = 0; v < V; ++v) bias_lm += double(model.lm_head.bias.data()[v]) * u[v];

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
  const T* scale = ln_f.normalises() ? hooks.captured(ln_f_scale).data() : nullptr;
  const T* weight = ln_f.weight.defined() ? ln_f.weight.data() : nullptr;
  for (int64_t t = 0; t < n; ++t) {
    // g_c(t): ln_f's scale and weight times the direction, centred when ln_f centres (the direction itself
    // with the identity norm).
    std::vector<double> g(dir);
    if (scale) {
      double mean = 0;
      for (int64_t d = 0; d < D; ++d) {
        g[d] = double(scale[t]) * (weight ? double(weight[d]) : 1.0) * dir[d];
        mean += g[d] / double(D);
      }
      if (ln_f.centres())
        for (double& x : g) x -= mean;
    }
    for (size_t p = 0; p < points.size(); ++p)
      acc[p][t] = dot(hooks.captured(points[p]).data() + t * D, g) + bias_ln + bias_lm;
    size_t c = 0;
    comp[c++][t] = dot(model.tok_emb.weight.data() + int64_t(ids[t]) * D, g);
    comp[c++][t] = dot(model.pos_emb.weight.data() + t * D, g);
    for (int l = 0; l < L; ++l) {
      const nn::MultiHeadAttention<T>& attn = model.blocks[l]->attn;
      const T* Wo = attn.wo.weight.data();  // (D out, D in); head h reads input columns [h*dk, (h+1)*dk)
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
      if (attn.wo.bias.defined()) comp[c++][t] = dot(attn.wo.bias.data(), g);
      if (!model.shape.attention_only)
        comp[c++][t] = dot(hooks.captured(nn::hook_name(nn::Point::mlp_out, l)).data() + t * D, g);
    }
    if (ln_f.bias.defined()) comp[c++][t] = bias_ln;
    if (model.lm_head.bias.defined()) comp[c++][t] = bias_lm;
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

template findings::LensResult logit_lens<float>(const nn::CausalLM<float>&, const std::vector<int32_t>&, int,
                                                int);
template findings::LensResult logit_lens<double>(const nn::CausalLM<double>&, const std::vector<int32_t>&,
                                                 int, int);

}  // namespace study
