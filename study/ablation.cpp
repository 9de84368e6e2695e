// Zero and mean ablation of attention heads (see ablation.h).
#include "study/ablation.h"

#include <algorithm>
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

}  // namespace study
