// Denoising activation patching through hooks (see patching.h).
#include "analysis/patching.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "io/run_layout.h"

namespace analysis {
namespace {

// logits (B, T, V): logit[answer] - logit[wrong] at the last position of entry b, in double.
double logit_diff(const ag::Tensor<float>& logits, int64_t b, int answer, int wrong) {
  const int64_t T = logits.size(1), V = logits.size(2);
  const float* row = logits.data() + (b * T + T - 1) * V;
  return static_cast<double>(row[answer]) - static_cast<double>(row[wrong]);
}

// `n` copies of ids, back to back.
std::vector<int32_t> repeat(const std::vector<int32_t>& ids, int64_t n) {
  std::vector<int32_t> out;
  out.reserve(ids.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

// Runs `n` copies of the corrupt input with `fn` at `point` and returns each entry's recovered fraction.
// fn copies the clean values it needs into its own copy of the activation.
std::vector<double> patched_runs(const nn::CausalLM<float>& model, const std::vector<int32_t>& corrupt,
                                 int64_t n, const std::string& point, nn::Hooks<float>::Fn fn, int answer,
                                 int wrong, double clean, double corrupt_diff) {
  nn::Hooks<float> hooks;
  hooks.add(point, std::move(fn));
  const int64_t T = static_cast<int64_t>(corrupt.size());
  const ag::Tensor<float> logits = model.forward(repeat(corrupt, n), n, T, {}, &hooks);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b)
    out[b] = (logit_diff(logits, b, answer, wrong) - corrupt_diff) / (clean - corrupt_diff);
  return out;
}

// The errors activation_patching documents.
void check_inputs(const nn::CausalLM<float>& model, const std::vector<int32_t>& clean,
                  const std::vector<int32_t>& corrupt, int answer, int wrong) {
  if (clean.empty() || corrupt.empty())
    throw std::invalid_argument("patching: --clean and --corrupt need tokens");
  if (clean.size() != corrupt.size())
    throw std::invalid_argument("patching: --clean has " + std::to_string(clean.size()) +
                                " tokens but --corrupt has " + std::to_string(corrupt.size()) +
                                "; they must have the same length");
  const int V = static_cast<int>(model.shape.vocab);
  for (int id : {answer, wrong})
    if (id < 0 || id >= V)
      throw std::invalid_argument("patching: token id " + std::to_string(id) + " outside the vocabulary 0.." +
                                  std::to_string(V - 1));
  if (answer == wrong)
    throw std::invalid_argument("patching: --answer and --wrong are the same token (id " +
                                std::to_string(answer) + "); the metric would be 0");
}

}  // namespace

int top_prediction(const nn::CausalLM<float>& model, const std::vector<int32_t>& ids) {
  ag::NoGradScope no_grad;
  const int64_t T = static_cast<int64_t>(ids.size());
  const ag::Tensor<float> logits = model.forward(ids, 1, T);
  const int64_t V = logits.size(2);
  const float* row = logits.data() + (T - 1) * V;
  return static_cast<int>(std::max_element(row, row + V) - row);
}

std::pair<int, int> default_answer_wrong(const nn::CausalLM<float>& model, const std::vector<int32_t>& clean,
                                         const std::vector<int32_t>& corrupt) {
  const int answer = top_prediction(model, clean), wrong = top_prediction(model, corrupt);
  if (answer == wrong)
    throw std::invalid_argument(
        "the model's top prediction is token id " + std::to_string(answer) +
        " on both clean and corrupt, so the default metric is 0; give answer and wrong");
  return {answer, wrong};
}

findings::PatchingResult activation_patching(const nn::CausalLM<float>& model,
                                             const std::vector<int32_t>& clean,
                                             const std::vector<int32_t>& corrupt, int answer, int wrong) {
  check_inputs(model, clean, corrupt, answer, wrong);
  ag::NoGradScope no_grad;
  const int64_t T = static_cast<int64_t>(clean.size());
  const int L = static_cast<int>(model.shape.n_layers);
  const int H = static_cast<int>(model.shape.n_heads);
  const int64_t D = model.shape.d_model, dk = D / H;

  // The clean run's activations, and both unpatched metrics.
  nn::Hooks<float> cache;
  std::vector<std::string> resid_points;
  for (int l = 0; l < L; ++l) resid_points.push_back(nn::hook_name(nn::Point::resid_pre, l));
  resid_points.push_back(nn::hook_name(nn::Point::resid_post, L - 1));
  for (const std::string& p : resid_points) cache.capture(p);
  for (int l = 0; l < L; ++l)
    for (nn::Point p : {nn::Point::attn_q, nn::Point::attn_k, nn::Point::attn_v, nn::Point::attn_pattern,
                        nn::Point::attn_z})
      cache.capture(nn::hook_name(p, l));
  findings::PatchingResult r;
  r.answer = answer;
  r.wrong = wrong;
  r.clean = logit_diff(model.forward(clean, 1, T, {}, &cache), 0, answer, wrong);
  nn::Hooks<float> none;  // the reference forward, as the patched runs take: a metric's rounding is theirs
  r.corrupt = logit_diff(model.forward(corrupt, 1, T, {}, &none), 0, answer, wrong);
  if (r.clean == r.corrupt)
    throw std::invalid_argument("patching: the clean and corrupt runs give the same logit difference (" +
                                std::to_string(r.clean) + "); there is nothing to recover");

  // Residual stream: entry t of the batch gets the clean vector at position t.
  for (int l = 0; l <= L; ++l) {
    const ag::Tensor<float> source = cache.captured(resid_points[l]);  // (1, T, D)
    auto fn = [source, T, D](const ag::Tensor<float>& value) {
      ag::Tensor<float> out = ag::Tensor<float>::from(
          value.shape(), std::vector<float>(value.data(), value.data() + value.numel()));
      for (int64_t t = 0; t < T; ++t)
        std::copy(source.data() + t * D, source.data() + (t + 1) * D, out.data() + (t * T + t) * D);
      return out;
    };
    const std::vector<double> rec =
        patched_runs(model, corrupt, T, resid_points[l], fn, answer, wrong, r.clean, r.corrupt);
    for (int64_t t = 0; t < T; ++t) r.resid_pre.push_back({l, static_cast<int>(t), rec[t]});
  }
  // Heads: for z, q, k and v (each (B, T, H, dk); k and v (B, T, Hkv, dk), per kv head), entry t gets head
  // h's clean value at position t; for z entry T gets it at every position.
  for (int l = 0; l < L; ++l)
    for (nn::Point kind : {nn::Point::attn_z, nn::Point::attn_q, nn::Point::attn_k, nn::Point::attn_v}) {
      const std::string point = nn::hook_name(kind, l);
      const ag::Tensor<float> source = cache.captured(point);  // (1, T, H or Hkv, dk)
      const int heads = static_cast<int>(source.size(2));      // the point's heads
      const bool all = kind == nn::Point::attn_z;
      std::vector<findings::HeadPositionPatch>& list = kind == nn::Point::attn_z   ? r.head_z
                                                       : kind == nn::Point::attn_q ? r.head_q
                                                       : kind == nn::Point::attn_k ? r.head_k
                                                                                   : r.head_v;
      for (int h = 0; h < heads; ++h) {
        auto fn = [source, T, heads, dk, h, all](const ag::Tensor<float>& value) {
          ag::Tensor<float> out = ag::Tensor<float>::from(
              value.shape(), std::vector<float>(value.data(), value.data() + value.numel()));
          auto put = [&](int64_t b, int64_t t) {
            const float* from = source.data() + (t * heads + h) * dk;
            std::copy(from, from + dk, out.data() + ((b * T + t) * heads + h) * dk);
          };
          for (int64_t t = 0; t < T; ++t) {
            put(t, t);
            if (all) put(T, t);
          }
          return out;
        };
        const std::vector<double> rec =
            patched_runs(model, corrupt, T + (all ? 1 : 0), point, fn, answer, wrong, r.clean, r.corrupt);
        for (int64_t t = 0; t < T; ++t) list.push_back({l, h, static_cast<int>(t), rec[t]});
        if (all) r.head_all.push_back({l, h, rec[T]});
      }
    }
  // Patterns: entry h gets head h's whole clean pattern (H, T, S).
  for (int l = 0; l < L; ++l) {
    const std::string point = nn::hook_name(nn::Point::attn_pattern, l);
    const ag::Tensor<float> source = cache.captured(point);  // (1, H, T, T)
    auto fn = [source, T, H](const ag::Tensor<float>& value) {
      ag::Tensor<float> out = ag::Tensor<float>::from(
          value.shape(), std::vector<float>(value.data(), value.data() + value.numel()));
      for (int64_t h = 0; h < H; ++h)
        std::copy(source.data() + h * T * T, source.data() + (h + 1) * T * T,
                  out.data() + (h * H + h) * T * T);
      return out;
    };
    const std::vector<double> rec =
        patched_runs(model, corrupt, H, point, fn, answer, wrong, r.clean, r.corrupt);
    for (int h = 0; h < H; ++h) r.head_pattern.push_back({l, h, rec[h]});
  }
  return r;
}

template <typename T>
PointGradients<T> point_gradients(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t B,
                                  int64_t n, const std::vector<T>& grad_logits,
                                  const std::vector<std::string>& points, nn::Hooks<T>* hooks) {
  const int64_t V = model.shape.vocab;
  if (!grad_logits.empty() && static_cast<int64_t>(grad_logits.size()) != B * n * V)
    throw std::invalid_argument("grad_logits: expected the logits' shape (" + std::to_string(B) + ", " +
                                std::to_string(n) + ", " + std::to_string(V) + "), " +
                                std::to_string(B * n * V) + " values, got " +
                                std::to_string(grad_logits.size()));
  if (grad_logits.empty() && n < 2)
    throw std::invalid_argument("the next-token loss needs at least 2 tokens, got " + std::to_string(n));
  nn::Hooks<T> own;
  nn::Hooks<T>& at = hooks ? *hooks : own;
  for (const std::string& p : points) {
    at.capture(p);
    at.grad(p);
  }
  PointGradients<T> out;
  {
    nn::NoParameterGrads<T> frozen(model);
    out.logits = model.forward(ids, B, n, {}, &at);
    if (grad_logits.empty()) {
      std::vector<int32_t> targets(ids.size(), -1);  // the next token at 0..n-2 of each row
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t + 1 < n; ++t) targets[b * n + t] = ids[b * n + t + 1];
      ag::Tensor<T> loss = ag::cross_entropy(out.logits, targets, -1);
      out.loss = static_cast<double>(loss.item());
      loss.backward();
    } else {
      out.logits.backward(grad_logits);
    }
  }
  for (const std::string& p : points) {
    out.values[p] = at.captured(p);
    out.gradients[p] = at.gradient(p);
  }
  return out;
}

template PointGradients<float> point_gradients<float>(const nn::CausalLM<float>&, const std::vector<int32_t>&,
                                                      int64_t, int64_t, const std::vector<float>&,
                                                      const std::vector<std::string>&, nn::Hooks<float>*);
template PointGradients<double> point_gradients<double>(const nn::CausalLM<double>&,
                                                        const std::vector<int32_t>&, int64_t, int64_t,
                                                        const std::vector<double>&,
                                                        const std::vector<std::string>&, nn::Hooks<double>*);

findings::PatchEffects attribution_patching(const nn::CausalLM<float>& model,
                                            const std::vector<int32_t>& clean,
                                            const std::vector<int32_t>& corrupt, int answer, int wrong,
                                            double* clean_diff, double* corrupt_diff) {
  check_inputs(model, clean, corrupt, answer, wrong);
  const int64_t T = static_cast<int64_t>(clean.size());
  const int L = static_cast<int>(model.shape.n_layers);
  const int64_t H = model.shape.n_heads, D = model.shape.d_model, dk = D / H;
  std::vector<std::string> resid_points;
  for (int l = 0; l < L; ++l) resid_points.push_back(nn::hook_name(nn::Point::resid_pre, l));
  resid_points.push_back(nn::hook_name(nn::Point::resid_post, L - 1));
  const nn::Point head_kinds[] = {nn::Point::attn_z, nn::Point::attn_q, nn::Point::attn_k, nn::Point::attn_v,
                                  nn::Point::attn_pattern};
  std::vector<std::string> points = resid_points;
  for (int l = 0; l < L; ++l)
    for (nn::Point p : head_kinds) points.push_back(nn::hook_name(p, l));

  // The clean run's activations (no graph).
  nn::Hooks<float> clean_hooks;
  for (const std::string& p : points) clean_hooks.capture(p);
  double clean_metric = 0;
  {
    ag::NoGradScope no_grad;
    clean_metric = logit_diff(model.forward(clean, 1, T, {}, &clean_hooks), 0, answer, wrong);
  }
  // The corrupt run's activations and the metric's gradient at each of them, from one backward that
  // computes no parameter gradient (nn::NoParameterGrads): only the activations' gradients are needed.
  const int64_t V = model.shape.vocab;
  std::vector<float> seed(static_cast<size_t>(T * V), 0.0f);
  seed[(T - 1) * V + answer] = 1.0f;
  seed[(T - 1) * V + wrong] = -1.0f;
  const PointGradients<float> grads = point_gradients(model, corrupt, 1, T, seed, points);
  const double corrupt_metric = logit_diff(grads.logits, 0, answer, wrong);
  if (clean_metric == corrupt_metric)
    throw std::invalid_argument("patching: the clean and corrupt runs give the same logit difference (" +
                                std::to_string(clean_metric) + "); there is nothing to recover");
  if (clean_diff) *clean_diff = clean_metric;
  if (corrupt_diff) *corrupt_diff = corrupt_metric;
  const double scale = 1.0 / (clean_metric - corrupt_metric);
  // sum over the elements [offset, offset + n) of (clean - corrupt) * grad.
  auto term = [&](const std::string& point, const ag::Tensor<float>& grad, int64_t offset, int64_t n) {
    const float* c = clean_hooks.captured(point).data() + offset;
    const float* x = grads.values.at(point).data() + offset;
    const float* g = grad.data() + offset;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += (double(c[i]) - double(x[i])) * double(g[i]);
    return s * scale;
  };
  findings::PatchEffects e;
  for (int l = 0; l <= L; ++l) {
    const ag::Tensor<float>& g = grads.gradients.at(resid_points[l]);  // (1, T, D)
    for (int64_t t = 0; t < T; ++t) e.resid_pre.push_back({l, int(t), term(resid_points[l], g, t * D, D)});
  }
  for (int l = 0; l < L; ++l)
    for (nn::Point kind : head_kinds) {
      const std::string point = nn::hook_name(kind, l);
      const ag::Tensor<float>& g = grads.gradients.at(point);
      if (kind == nn::Point::attn_pattern) {  // (1, H, T, S): the whole head
        for (int64_t h = 0; h < H; ++h)
          e.head_pattern.push_back({l, int(h), term(point, g, h * T * T, T * T)});
        continue;
      }
      std::vector<findings::HeadPositionPatch>& list = kind == nn::Point::attn_z   ? e.head_z
                                                       : kind == nn::Point::attn_q ? e.head_q
                                                       : kind == nn::Point::attn_k ? e.head_k
                                                                                   : e.head_v;
      const int64_t heads = g.size(2);       // the point's heads: Hkv for k and v
      for (int64_t h = 0; h < heads; ++h) {  // (1, T, heads, dk)
        double all = 0;
        for (int64_t t = 0; t < T; ++t) {
          const double v = term(point, g, (t * heads + h) * dk, dk);
          list.push_back({l, int(h), int(t), v});
          all += v;
        }
        // The estimate is linear: patching every position at once is the sum over positions.
        if (kind == nn::Point::attn_z) e.head_all.push_back({l, int(h), all});
      }
    }
  return e;
}

Output<findings::PatchingResult> patch(StudyRun& run, const PatchRequest& request) {
  if (request.answer.empty() != request.wrong.empty())
    throw RequestError("give both answer and wrong, or neither");
  if (!request.save.empty()) {
    const std::string problem = save_name_problem(request.save);
    if (!problem.empty()) throw RequestError("save: " + problem);
  }
  Output<findings::PatchingResult> out;
  const std::vector<int32_t> clean = input_ids(run, request.clean, "clean", Bos::kAdd, &out.notes);
  const std::vector<int32_t> corrupt = input_ids(run, request.corrupt, "corrupt", Bos::kAdd, &out.notes);
  if (clean.size() != corrupt.size())
    throw RequestError("clean has " + std::to_string(clean.size()) + " tokens but corrupt has " +
                       std::to_string(corrupt.size()) + "; patching needs inputs of the same length");
  int answer = 0, wrong = 0;
  if (!request.answer.empty()) {
    answer = token_id(run, request.answer, "answer");
    wrong = token_id(run, request.wrong, "wrong");
    if (answer == wrong)
      throw RequestError("answer and wrong are the same token '" + token_label(run, answer) + "'");
  } else {
    std::tie(answer, wrong) = default_answer_wrong(*run.model, clean, corrupt);
  }
  findings::PatchingResult& r = out.result;
  r = activation_patching(*run.model, clean, corrupt, answer, wrong);
  if (request.attribution) r.attribution = attribution_patching(*run.model, clean, corrupt, answer, wrong);
  r.clean_tokens = token_labels(run, clean);
  r.corrupt_tokens = token_labels(run, corrupt);
  r.answer_token = token_label(run, answer);
  r.wrong_token = token_label(run, wrong);
  if (!request.save.empty()) out.wrote = save_patch(run, request.save, r);
  return out;
}

std::vector<std::string> save_patch(const StudyRun& run, const std::string& name,
                                    const findings::PatchingResult& r) {
  const std::string stem = io::layout::patching_stem(run.dir, name);
  return save_named(run, stem, findings::patching_file_text(r, stem + ".json"),
                    findings::svg_patching(r, picture_title(run, "activation patching '" + name + "'")));
}

}  // namespace analysis
