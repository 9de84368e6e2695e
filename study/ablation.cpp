// Zero and mean ablation of attention heads (see ablation.h).
#include "study/ablation.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace study {

std::vector<ag::Tensor<float>> mean_head_outputs(const nn::CausalLM<float>& model, const train::Batch& batch,
                                                 int chunk) {
  if (batch.B < 1) throw std::invalid_argument("mean_head_outputs: the batch has no sequences");
  if (chunk < 1) chunk = 1;
  ag::NoGradScope no_grad;
  const int64_t T = batch.T;
  const size_t L = model.blocks.size();
  nn::Hooks<float> hooks;
  for (size_t l = 0; l < L; ++l) hooks.capture(nn::hook_name(nn::Point::attn_z, l));
  // Sums in double so that the mean of thousands of sequences does not depend on their order in float.
  std::vector<std::vector<double>> sums(L);
  for (int start = 0; start < batch.B; start += chunk) {
    const int b = std::min(chunk, batch.B - start);
    const auto begin = batch.inputs.begin() + static_cast<int64_t>(start) * T;
    const std::vector<int32_t> ids(begin, begin + static_cast<int64_t>(b) * T);
    model.forward(ids, b, T, {}, &hooks);
    for (size_t l = 0; l < L; ++l) {
      const ag::Tensor<float>& z = hooks.captured(nn::hook_name(nn::Point::attn_z, l));  // (b, T, H, dk)
      const size_t per = static_cast<size_t>(z.numel() / b);
      if (sums[l].empty()) sums[l].assign(per, 0.0);
      const float* p = z.data();
      for (int i = 0; i < b; ++i)
        for (size_t k = 0; k < per; ++k) sums[l][k] += p[i * per + k];
    }
  }
  std::vector<ag::Tensor<float>> means;
  for (size_t l = 0; l < L; ++l) {
    const auto& attn = model.blocks[l]->attn;
    std::vector<float> v(sums[l].size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(sums[l][k] / batch.B);
    means.push_back(ag::Tensor<float>::from({T, attn.n_heads, attn.dk}, std::move(v)));
  }
  return means;
}

AblationReport ablate_heads(const nn::CausalLM<float>& model, const train::Batch& batch, int chunk) {
  AblationReport report;
  nn::Hooks<float> none;  // the reference forward, as the ablated runs take
  report.baseline = train::evaluate(model, batch, chunk, &none);
  const std::vector<ag::Tensor<float>> means = mean_head_outputs(model, batch, chunk);
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    const std::string point = nn::hook_name(nn::Point::attn_z, l);
    const ag::Tensor<float> zeros = ag::Tensor<float>::zeros(means[l].shape());
    for (int h = 0; h < static_cast<int>(model.blocks[l]->attn.n_heads); ++h) {
      HeadAblation a;
      a.layer = static_cast<int>(l);
      a.head = h;
      nn::Hooks<float> zeroed, mean;
      zeroed.patch_head(point, h, {}, zeros);
      mean.patch_head(point, h, {}, means[l]);
      a.zeroed = train::evaluate(model, batch, chunk, &zeroed);
      a.mean = train::evaluate(model, batch, chunk, &mean);
      report.heads.push_back(a);
    }
  }
  return report;
}

ModeAblationReport ablate_heads_mode(const nn::CausalLM<float>& model, const train::Batch& batch,
                                     AblationMode mode, bool per_position, int k, uint64_t seed) {
  if (mode == AblationMode::resample && (k < 1 || batch.B < 2))
    throw std::invalid_argument("resample ablation needs k >= 1 and at least 2 sequences (k " +
                                std::to_string(k) + ", " + std::to_string(batch.B) + " sequences)");
  const int B = batch.B, T = batch.T, chunk = B;  // one forward per evaluation: the sources span the batch
  ModeAblationReport report;
  nn::Hooks<float> none;
  report.baseline = train::evaluate(model, batch, chunk, &none);
  const size_t L = model.blocks.size();
  // The sources each mode patches in, per layer: (T, H, dk) for zero and mean, one (B, T, H, dk) per draw
  // for resample.
  std::vector<ag::Tensor<float>> means;
  if (mode == AblationMode::mean) means = mean_head_outputs(model, batch, chunk);
  std::vector<std::vector<ag::Tensor<float>>> draws(L);  // [layer][draw]
  if (mode == AblationMode::resample) {
    nn::Hooks<float> cache;
    for (size_t l = 0; l < L; ++l) cache.capture(nn::hook_name(nn::Point::attn_z, l));
    {
      ag::NoGradScope no_grad;
      model.forward(batch.inputs, B, T, {}, &cache);
    }
    ag::Rng rng(seed);
    for (int r = 0; r < k; ++r) {
      // A random derangement: shuffle, then move any fixed point to its neighbour's place.
      std::vector<int> perm(static_cast<size_t>(B));
      for (int b = 0; b < B; ++b) perm[b] = b;
      for (int b = B - 1; b > 0; --b)
        std::swap(perm[b], perm[static_cast<int>(rng.uniform() * (b + 1)) % (b + 1)]);
      for (int b = 0; b < B; ++b)
        if (perm[b] == b) std::swap(perm[b], perm[(b + 1) % B]);
      for (size_t l = 0; l < L; ++l) {
        const ag::Tensor<float>& z = cache.captured(nn::hook_name(nn::Point::attn_z, l));  // (B, T, H, dk)
        const int64_t per = z.numel() / B;
        std::vector<float> v(static_cast<size_t>(z.numel()));
        for (int b = 0; b < B; ++b)
          std::copy(z.data() + perm[b] * per, z.data() + (perm[b] + 1) * per, v.begin() + b * per);
        draws[l].push_back(ag::Tensor<float>::from(z.shape(), std::move(v)));
      }
    }
  }
  for (size_t l = 0; l < L; ++l) {
    const std::string point = nn::hook_name(nn::Point::attn_z, l);
    const auto& attn = model.blocks[l]->attn;
    for (int h = 0; h < static_cast<int>(attn.n_heads); ++h)
      for (int pos = -1; pos < (per_position ? T : 0); ++pos) {
        const std::vector<int64_t> positions = pos < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{pos};
        ModeAblation a;
        a.layer = static_cast<int>(l);
        a.head = h;
        a.position = pos;
        const int runs = mode == AblationMode::resample ? k : 1;
        for (int r = 0; r < runs; ++r) {
          nn::Hooks<float> hooks;
          const ag::Tensor<float> source = mode == AblationMode::zero
                                               ? ag::Tensor<float>::zeros({T, attn.n_heads, attn.dk})
                                           : mode == AblationMode::mean ? means[l]
                                                                        : draws[l][static_cast<size_t>(r)];
          hooks.patch_head(point, h, positions, source);
          const train::EvalResult e = train::evaluate(model, batch, chunk, &hooks);
          a.acc += e.acc / runs;
          a.loss += e.loss / runs;
        }
        report.heads.push_back(a);
      }
  }
  return report;
}

void merge_ablation(findings::HeadScoresFile& scores, const AblationReport& report) {
  for (const HeadAblation& a : report.heads) {
    auto it = std::find_if(scores.heads.begin(), scores.heads.end(), [&](const findings::HeadScores& h) {
      return h.layer == a.layer && h.head == a.head;
    });
    if (it == scores.heads.end())
      throw std::invalid_argument("merge_ablation: no scores for layer " + std::to_string(a.layer) +
                                  " head " + std::to_string(a.head));
    findings::AblationResult r;
    r.zero_acc = a.zeroed.acc;
    r.mean_acc = a.mean.acc;
    r.zero_loss = a.zeroed.loss;
    r.mean_loss = a.mean.loss;
    it->ablation = r;
  }
}

const char* ablation_mode_name(AblationMode mode) {
  switch (mode) {
    case AblationMode::zero:
      return "zero";
    case AblationMode::mean:
      return "mean";
    case AblationMode::resample:
      return "resample";
  }
  return "";
}

AblationMode parse_ablation_mode(const std::string& name, const std::string& argument) {
  for (AblationMode m : {AblationMode::zero, AblationMode::mean, AblationMode::resample})
    if (name == ablation_mode_name(m)) return m;
  throw std::invalid_argument(argument + ": expected zero, mean or resample, got '" + name + "'");
}

nlohmann::json mode_ablation_to_json(const ModeAblationReport& report, AblationMode mode, int sequences,
                                     int k) {
  nlohmann::json heads = nlohmann::json::array();
  for (const ModeAblation& h : report.heads)
    heads.push_back({{"layer", h.layer},
                     {"head", h.head},
                     {"position", h.position < 0 ? nlohmann::json(nullptr) : nlohmann::json(h.position)},
                     {"acc", h.acc},
                     {"loss", h.loss}});
  return {{"mode", ablation_mode_name(mode)},
          {"sequences", sequences},
          {"k", mode == AblationMode::resample ? k : 1},
          {"baseline", {{"acc", report.baseline.acc}, {"loss", report.baseline.loss}}},
          {"heads", heads}};
}

}  // namespace study
