// Zero and mean ablation of attention heads (see ablation.h).
#include "analysis/ablation.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "analysis/run_study.h"
#include "analysis/scores.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"

namespace analysis {

std::vector<ag::Tensor<float>> mean_head_outputs(const nn::CausalLM<float>& model, const train::Batch& batch,
                                                 int chunk) {
  if (batch.B < 1) throw std::invalid_argument("mean_head_outputs: the batch has no sequences");
  if (chunk < 1) chunk = 1;
  ag::NoGradScope no_grad;
  const int64_t T = batch.T;
  const size_t L = static_cast<size_t>(model.shape.n_layers);
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
    const int64_t H = model.shape.n_heads, dk = model.shape.d_model / H;
    std::vector<float> v(sums[l].size());
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(sums[l][k] / batch.B);
    means.push_back(ag::Tensor<float>::from({T, H, dk}, std::move(v)));
  }
  return means;
}

AblationReport ablate_heads(const nn::CausalLM<float>& model, const train::Batch& batch, int chunk) {
  AblationReport report;
  nn::Hooks<float> none;  // the reference forward, as the ablated runs take
  report.baseline = train::evaluate(model, batch, chunk, &none);
  const std::vector<ag::Tensor<float>> means = mean_head_outputs(model, batch, chunk);
  for (size_t l = 0; l < static_cast<size_t>(model.shape.n_layers); ++l) {
    const std::string point = nn::hook_name(nn::Point::attn_z, l);
    const ag::Tensor<float> zeros = ag::Tensor<float>::zeros(means[l].shape());
    for (int h = 0; h < static_cast<int>(model.shape.n_heads); ++h) {
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
  const size_t L = static_cast<size_t>(model.shape.n_layers);
  // Every (layer, head, position) in report order; each accumulates its runs' acc / runs and loss / runs in
  // draw order, so the sums do not depend on whether the draws are kept or streamed.
  for (size_t l = 0; l < L; ++l)
    for (int h = 0; h < static_cast<int>(model.shape.n_heads); ++h)
      for (int pos = -1; pos < (per_position ? T : 0); ++pos) {
        ModeAblation a;
        a.layer = static_cast<int>(l);
        a.head = h;
        a.position = pos;
        report.heads.push_back(a);
      }
  const int runs = mode == AblationMode::resample ? k : 1;
  // Evaluates every entry with layer l's z replaced by `sources[l]` ((T, H, dk), or (B, T, H, dk) for a
  // resample draw) at its head and position, adding the run's share to the entry.
  auto evaluate_all = [&](const std::vector<ag::Tensor<float>>& sources) {
    for (ModeAblation& a : report.heads) {
      const std::vector<int64_t> positions =
          a.position < 0 ? std::vector<int64_t>{} : std::vector<int64_t>{a.position};
      nn::Hooks<float> hooks;
      hooks.patch_head(nn::hook_name(nn::Point::attn_z, static_cast<size_t>(a.layer)), a.head, positions,
                       sources[static_cast<size_t>(a.layer)]);
      const train::EvalResult e = train::evaluate(model, batch, chunk, &hooks);
      a.acc += e.acc / runs;
      a.loss += e.loss / runs;
    }
  };
  if (mode == AblationMode::zero) {
    std::vector<ag::Tensor<float>> zeros;
    for (size_t l = 0; l < L; ++l) {
      const int64_t H = model.shape.n_heads, dk = model.shape.d_model / H;
      zeros.push_back(ag::Tensor<float>::zeros({T, H, dk}));
    }
    evaluate_all(zeros);
    return report;
  }
  if (mode == AblationMode::mean) {
    evaluate_all(mean_head_outputs(model, batch, chunk));
    return report;
  }
  // Resample: each draw is made, evaluated on every entry and dropped before the next, so memory holds the
  // batch's z and one draw whatever k is.
  nn::Hooks<float> cache;
  for (size_t l = 0; l < L; ++l) cache.capture(nn::hook_name(nn::Point::attn_z, l));
  {
    ag::NoGradScope no_grad;
    model.forward(batch.inputs, B, T, {}, &cache);
  }
  ag::Rng rng(seed);
  std::vector<int> perm(static_cast<size_t>(B));
  for (int r = 0; r < k; ++r) {
    // A random derangement: shuffle, then move any fixed point to its neighbour's place.
    for (int b = 0; b < B; ++b) perm[b] = b;
    for (int b = B - 1; b > 0; --b)
      std::swap(perm[b], perm[static_cast<int>(rng.uniform() * (b + 1)) % (b + 1)]);
    for (int b = 0; b < B; ++b)
      if (perm[b] == b) std::swap(perm[b], perm[(b + 1) % B]);
    std::vector<ag::Tensor<float>> draw;
    for (size_t l = 0; l < L; ++l) {
      const ag::Tensor<float>& z = cache.captured(nn::hook_name(nn::Point::attn_z, l));  // (B, T, H, dk)
      const int64_t per = z.numel() / B;
      std::vector<float> v(static_cast<size_t>(z.numel()));
      for (int b = 0; b < B; ++b)
        std::copy(z.data() + perm[b] * per, z.data() + (perm[b] + 1) * per, v.begin() + b * per);
      draw.push_back(ag::Tensor<float>::from(z.shape(), std::move(v)));
    }
    evaluate_all(draw);
  }
  return report;
}

Output<findings::ModeAblationResult> ablate(StudyRun& run, const AblateRequest& request) {
  AblationMode mode = AblationMode::zero;
  try {
    mode = parse_ablation_mode(request.mode, "mode");
  } catch (const std::invalid_argument& e) {
    throw RequestError(e.what());
  }
  if (request.n < 0)
    throw RequestError("n: expected at least 1 (0 = the default), got " + std::to_string(request.n));
  if (request.k < 1) throw RequestError("k: expected at least 1, got " + std::to_string(request.k));
  if (!request.ids.empty() && request.n != 0)
    throw RequestError("n: the sequences are the ids given; give n or ids, not both");
  Output<findings::ModeAblationResult> out;
  // The same held-out stream as training's evaluations, so the baseline agrees with metrics.jsonl.
  const train::Batch eval_set =
      request.ids.empty() ? run.task->eval_set(run.config.seed, train::held_out_count(run, request.n, "n"))
                          : sequences_batch(run, request.ids, "ids", &out.notes);
  if (mode == AblationMode::resample && eval_set.B < 2)
    throw RequestError("mode resample: needs at least 2 sequences (got " + std::to_string(eval_set.B) + ")");
  const ModeAblationReport r =
      ablate_heads_mode(*run.model, eval_set, mode, request.per_position, request.k, request.seed);
  out.result.mode = ablation_mode_name(mode);
  out.result.sequences = eval_set.B;
  out.result.k = mode == AblationMode::resample ? request.k : 1;
  out.result.baseline_acc = r.baseline.acc;
  out.result.baseline_loss = r.baseline.loss;
  out.result.heads = r.heads;
  return out;
}

namespace {

// Scores that describe this checkpoint: every head of the model, computed at its step.
bool scores_match(const findings::HeadScoresFile& s, const StudyRun& run) {
  if (s.step != run.step) return false;
  const size_t heads =
      static_cast<size_t>(run.model->shape.n_layers) * static_cast<size_t>(run.config.model.n_heads);
  if (s.heads.size() != heads) return false;
  for (const findings::HeadScores& h : s.heads)
    if (h.layer < 0 || h.layer >= static_cast<int>(run.model->shape.n_layers) || h.head < 0 ||
        h.head >= run.config.model.n_heads)
      return false;
  return true;
}

}  // namespace

Output<AblationScores> ablate_scores(StudyRun& run, int n_requested) {
  if (n_requested < 0)
    throw RequestError("n: expected at least 1 (0 = the default), got " + std::to_string(n_requested));
  const io::RunLock lock(run.dir);  // one writer per run folder
  const int n = train::held_out_count(run, n_requested, "n");
  const train::Batch eval_set = run.task->eval_set(run.config.seed, n);
  Output<AblationScores> out;
  const std::string scores_path = io::layout::scores_json(run.dir);
  findings::HeadScoresFile& scores = out.result.scores;
  bool have_scores = false;
  if (std::filesystem::exists(scores_path)) {
    scores = findings::read_head_scores(scores_path);
    have_scores = scores_match(scores, run);
    if (!have_scores)
      out.notes.push_back(scores_path + ": " +
                          (scores.step != run.step
                               ? "step " + std::to_string(scores.step) + ", but the checkpoint is at step " +
                                     std::to_string(run.step)
                               : std::string("does not list this model's heads")) +
                          "; recomputing the scores");
  }
  if (!have_scores) scores = analysis::scores(run, {}).result;
  const AblationReport report = ablate_heads(*run.model, eval_set);
  merge_ablation(scores, report);
  out.result.sequences = eval_set.B;
  out.result.baseline_acc = report.baseline.acc;
  out.result.baseline_loss = report.baseline.loss;
  findings::write_head_scores(scores_path, scores);
  write_run_report(run.dir, run.config.name);
  out.wrote = {scores_path, io::layout::report_html(run.dir)};
  return out;
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

}  // namespace analysis
