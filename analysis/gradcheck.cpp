#include "analysis/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "autograd/gradcheck.h"
#include "io/field_table.h"
#include "train/model_factory.h"
#include "train/tasks.h"

namespace analysis {

namespace {

// Central differences cost two forwards per parameter: keep the layers, heads and masks of the config
// but cap the widths, so a check takes seconds, not hours.
train::Config shrink(train::Config c, std::string& note) {
  const train::Config original = c;
  // Grouped-query attention keeps query heads sharing a kv head: up to 4 query heads, the same group size.
  const int64_t group = c.model.n_heads / nn::kv_heads(c.model);
  c.model.n_heads = std::min<int64_t>(c.model.n_heads, group > 1 ? 4 : 2);
  c.model.n_kv_heads = std::max<int64_t>(1, c.model.n_heads / group);
  c.model.d_model = std::min(c.model.d_model, 4 * c.model.n_heads);
  if (c.model.d_model % c.model.n_heads) c.model.d_model = 4 * c.model.n_heads;
  c.model.d_ff = std::min<int64_t>(c.model.d_ff, 16);
  c.model.n_layers = std::min<int64_t>(c.model.n_layers, 2);
  c.train.batch_size = 2;
  if (c.model.d_model != original.model.d_model || c.model.n_heads != original.model.n_heads ||
      c.model.d_ff != original.model.d_ff || c.model.n_layers != original.model.n_layers)
    note = "shrunk to a checkable size: d_model " + std::to_string(c.model.d_model) + ", n_heads " +
           std::to_string(c.model.n_heads) +
           (group > 1 ? ", n_kv_heads " + std::to_string(c.model.n_kv_heads) : std::string()) + ", d_ff " +
           std::to_string(c.model.d_ff) + ", n_layers " + std::to_string(c.model.n_layers) +
           " (the config has " + std::to_string(original.model.d_model) + ", " +
           std::to_string(original.model.n_heads) + ", " + std::to_string(original.model.d_ff) + ", " +
           std::to_string(original.model.n_layers) + "); batch 2";
  return c;
}

}  // namespace

Output<findings::GradcheckReport> gradcheck(const GradcheckRequest& request) {
  if (request.config.empty()) throw RequestError("config: expected a config file, got none");
  // A NaN tolerance passes nothing and a negative one fails everything: both are mistakes.
  if (!(std::isfinite(request.tolerance) && request.tolerance > 0))
    throw RequestError("tolerance: expected a positive finite number, got " +
                       io::show_number(request.tolerance));
  Output<findings::GradcheckReport> out;
  findings::GradcheckReport& r = out.result;
  r.config = request.config;
  r.tolerance = request.tolerance;
  r.note = "batch 2";
  const train::Config config = shrink(train::load_config(request.config, request.set), r.note);
  const auto task = train::make_task(config.task, config.seed);
  auto model = train::make_model<double>(config);
  ag::Rng rng(config.seed);
  // LayerNorm weights start at 1 and biases at 0; a small perturbation makes every term of the gradient
  // count.
  std::vector<ag::Tensor<double>> params;
  for (auto& p : model->named_parameters()) {
    for (double& v : p.tensor->values()) v += 0.05 * rng.normal();
    params.push_back(*p.tensor);
    r.tensors.push_back({p.name, 0, 0});
  }
  ag::Rng data(config.seed + 1);
  const train::Batch batch = task->sample(data, config.train.batch_size);
  r.T = batch.T;
  r.parameters = model->parameter_count();
  const ag::GradcheckResult g = ag::gradcheck(
      [&](const std::vector<ag::Tensor<double>>&) {
        return ag::cross_entropy(model->forward(batch.inputs, batch.B, batch.T), batch.targets, -1);
      },
      params);
  for (size_t i = 0; i < r.tensors.size() && i < g.worst_rel_error.size(); ++i) {
    r.tensors[i].worst_rel_error = g.worst_rel_error[i];
    r.tensors[i].worst_index = g.worst_index[i];
  }
  r.worst = g.worst();
  r.pass = r.worst <= r.tolerance;
  return out;
}

}  // namespace analysis
