#include "analysis/entropy.h"

#include <cmath>

#include "analysis/capture.h"

namespace analysis {

double attention_entropy(const std::vector<float>& row) {
  double sum = 0;
  for (float w : row)
    if (w > 0) sum -= static_cast<double>(w) * std::log(static_cast<double>(w));
  return sum;
}

Output<findings::EntropyResult> entropy(StudyRun& run, const EntropyRequest& request) {
  if (request.n < 0) throw RequestError("n: must be >= 0, got " + std::to_string(request.n));
  if (!request.ids.empty() && request.n > 0)
    throw RequestError("n: goes with the held-out sequences; give ids or n, not both");
  Output<findings::EntropyResult> out;
  const train::Batch batch =
      request.ids.empty() ? run.task->eval_set(run.config.seed, train::held_out_count(run, request.n, "n"))
                          : sequences_batch(run, request.ids, "ids", &out.notes);
  const std::vector<findings::Probe> probes = capture_attention(*run.model, *run.task, batch);

  findings::EntropyResult& r = out.result;
  r.step = run.step;
  r.sequences = batch.B;
  const int L = static_cast<int>(run.model->shape.n_layers), H = static_cast<int>(run.model->shape.n_heads);
  std::vector<double> sums(static_cast<size_t>(L) * H, 0.0);
  for (int b = 0; b < batch.B; ++b) {
    for (int i = 0; i < batch.T; ++i) {
      if (!batch.is_padding.empty() && batch.is_padding[static_cast<size_t>(b) * batch.T + i]) continue;
      ++r.rows;
      r.uniform += std::log(i + 1.0);
      for (const findings::HeadMap& map : probes[b].maps)
        sums[static_cast<size_t>(map.layer) * H + map.head] += attention_entropy(map.weights[i]);
    }
  }
  if (r.rows > 0) r.uniform /= static_cast<double>(r.rows);
  r.layers.assign(L, 0.0);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      const double mean = r.rows > 0 ? sums[static_cast<size_t>(l) * H + h] / static_cast<double>(r.rows) : 0;
      r.heads.push_back({l, h, mean});
      r.layers[l] += mean / H;
    }
  }
  return out;
}

}  // namespace analysis
