// Zero and mean ablation of attention heads (see ablation.h).
#include "train/ablation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ag {

HeadPatchGuard::~HeadPatchGuard() {
  for (auto& block : model_.blocks) {
    block->attn.patches.clear();
    block->attn.keep_head_outputs = false;
    block->attn.last_head_outputs = Tensor<float>();
  }
}

std::vector<std::vector<Tensor<float>>> mean_head_outputs(nn::CausalLM<float>& model, const Batch& batch,
                                                          int chunk) {
  if (batch.B < 1) throw std::invalid_argument("mean_head_outputs: the batch has no sequences");
  if (chunk < 1) chunk = 1;
  HeadPatchGuard guard(model);
  NoGradScope no_grad;
  const int64_t T = batch.T;
  const size_t L = model.blocks.size();
  // Sums in double so that the mean of thousands of sequences does not depend on their order in float.
  std::vector<std::vector<double>> sums(L);
  for (size_t l = 0; l < L; ++l) {
    auto& attn = model.blocks[l]->attn;
    attn.patches.clear();
    attn.keep_head_outputs = true;
    sums[l].assign(static_cast<size_t>(attn.n_heads * T * attn.dk), 0.0);
  }
  for (int start = 0; start < batch.B; start += chunk) {
    const int b = std::min(chunk, batch.B - start);
    const auto begin = batch.inputs.begin() + static_cast<int64_t>(start) * T;
    const std::vector<int32_t> ids(begin, begin + static_cast<int64_t>(b) * T);
    model.forward(ids, b, T);
    for (size_t l = 0; l < L; ++l) {
      const Tensor<float>& out = model.blocks[l]->attn.last_head_outputs;  // (b, H, T, dk)
      const size_t per = sums[l].size();
      if (static_cast<size_t>(out.numel()) != per * static_cast<size_t>(b))
        throw std::logic_error("mean_head_outputs: layer " + std::to_string(l) +
                               " kept head outputs of shape " + shape_str(out.shape()));
      const float* p = out.data();
      for (int i = 0; i < b; ++i)
        for (size_t k = 0; k < per; ++k) sums[l][k] += p[i * per + k];
    }
  }
  std::vector<std::vector<Tensor<float>>> means(L);
  for (size_t l = 0; l < L; ++l) {
    const auto& attn = model.blocks[l]->attn;
    const size_t per_head = static_cast<size_t>(T * attn.dk);
    for (int64_t h = 0; h < attn.n_heads; ++h) {
      std::vector<float> v(per_head);
      for (size_t k = 0; k < per_head; ++k) v[k] = static_cast<float>(sums[l][h * per_head + k] / batch.B);
      means[l].push_back(Tensor<float>::from({T, attn.dk}, std::move(v)));
    }
  }
  return means;
}

AblationReport ablate_heads(nn::CausalLM<float>& model, const Batch& batch, int chunk) {
  HeadPatchGuard guard(model);
  for (auto& block : model.blocks) block->attn.patches.clear();
  AblationReport report;
  report.baseline = evaluate(model, batch, chunk);
  const std::vector<std::vector<Tensor<float>>> means = mean_head_outputs(model, batch, chunk);
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    auto& attn = model.blocks[l]->attn;
    for (int h = 0; h < static_cast<int>(attn.n_heads); ++h) {
      HeadAblation a;
      a.layer = static_cast<int>(l);
      a.head = h;
      attn.patches = {nn::HeadPatch<float>{h, Tensor<float>()}};
      a.zeroed = evaluate(model, batch, chunk);
      attn.patches = {nn::HeadPatch<float>{h, means[l][h]}};
      a.mean = evaluate(model, batch, chunk);
      attn.patches.clear();
      report.heads.push_back(a);
    }
  }
  return report;
}

void merge_ablation(HeadScoresFile& scores, const AblationReport& report) {
  for (const HeadAblation& a : report.heads) {
    auto it = std::find_if(scores.heads.begin(), scores.heads.end(),
                           [&](const HeadScores& h) { return h.layer == a.layer && h.head == a.head; });
    if (it == scores.heads.end())
      throw std::invalid_argument("merge_ablation: no scores for layer " + std::to_string(a.layer) +
                                  " head " + std::to_string(a.head));
    AblationResult r;
    r.zero_acc = a.zeroed.acc;
    r.mean_acc = a.mean.acc;
    r.zero_loss = a.zeroed.loss;
    r.mean_loss = a.mean.loss;
    it->ablation = r;
  }
}

}  // namespace ag
