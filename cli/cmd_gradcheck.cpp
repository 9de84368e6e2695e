// attograd gradcheck CONFIG [--set ...]: the whole model's loss against central differences in float64,
// every parameter tensor, on the config's architecture shrunk to a checkable size (said on the output).
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "autograd/gradcheck.h"
#include "cli/commands.h"
#include "train/model_factory.h"
#include "train/tasks.h"

namespace cli {

namespace {

struct Args {
  std::string config;
  std::vector<std::string> sets;
  double tolerance = 1e-6;
};

// Central differences cost two forwards per parameter: keep the layers, heads and masks of the config
// but cap the widths, so a check takes seconds, not hours.
train::Config shrink(train::Config c, std::string& note) {
  const train::Config original = c;
  c.model.n_heads = std::min<int64_t>(c.model.n_heads, 2);
  c.model.d_model = std::min(c.model.d_model, 4 * c.model.n_heads);
  if (c.model.d_model % c.model.n_heads) c.model.d_model = 4 * c.model.n_heads;
  c.model.d_ff = std::min<int64_t>(c.model.d_ff, 16);
  c.model.n_layers = std::min<int64_t>(c.model.n_layers, 2);
  c.train.batch_size = 2;
  if (c.model.d_model != original.model.d_model || c.model.n_heads != original.model.n_heads ||
      c.model.d_ff != original.model.d_ff || c.model.n_layers != original.model.n_layers)
    note = "shrunk to a checkable size: d_model " + std::to_string(c.model.d_model) + ", n_heads " +
           std::to_string(c.model.n_heads) + ", d_ff " + std::to_string(c.model.d_ff) + ", n_layers " +
           std::to_string(c.model.n_layers) + " (the config has " + std::to_string(original.model.d_model) +
           ", " + std::to_string(original.model.n_heads) + ", " + std::to_string(original.model.d_ff) + ", " +
           std::to_string(original.model.n_layers) + "); batch 2";
  return c;
}

int run_gradcheck(const Args& a) {
  std::string note = "batch 2";
  const train::Config config = shrink(train::load_config(a.config, a.sets), note);
  const auto task = train::make_task(config.task, config.seed);
  auto model = train::make_model<double>(config);
  ag::Rng rng(config.seed);
  // LayerNorm weights start at 1 and biases at 0; a small perturbation makes every term of the gradient
  // count.
  std::vector<ag::Tensor<double>> params;
  std::vector<std::string> names;
  for (auto& p : model->named_parameters()) {
    for (double& v : p.tensor->values()) v += 0.05 * rng.normal();
    params.push_back(*p.tensor);
    names.push_back(p.name);
  }
  ag::Rng data(config.seed + 1);
  const train::Batch batch = task->sample(data, config.train.batch_size);
  std::printf("gradcheck %s: %s, T %d, %lld parameters in %zu tensors, float64 central differences\n",
              a.config.c_str(), note.c_str(), batch.T, static_cast<long long>(model->parameter_count()),
              params.size());
  std::fflush(stdout);
  const ag::GradcheckResult r = ag::gradcheck(
      [&](const std::vector<ag::Tensor<double>>&) {
        return ag::cross_entropy(model->forward(batch.inputs, batch.B, batch.T), batch.targets, -1);
      },
      params);
  std::printf("%s", r.report(names).c_str());
  const bool ok = r.worst() <= a.tolerance;
  std::printf("%s: worst relative error %.3e (tolerance %.1e)\n", ok ? "PASS" : "FAIL", r.worst(),
              a.tolerance);
  return ok ? 0 : 1;
}

}  // namespace

Command add_gradcheck(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("gradcheck", "whole-model finite-difference gradient check in float64");
  sub->add_option("CONFIG", a->config, "config file")->required();
  sub->add_option("--set", a->sets, "override a config field: key.path=value");
  sub->add_option("--tolerance", a->tolerance, "worst relative error allowed (default 1e-6)")
      ->check([](const std::string& text) {
        // A NaN tolerance passes nothing and a negative one fails everything: both are mistakes.
        double x = 0;
        try {
          size_t used = 0;
          x = std::stod(text, &used);
          if (used != text.size()) x = -1;
        } catch (const std::exception&) {
          x = -1;
        }
        return std::isfinite(x) && x > 0 ? std::string() : "expected a positive finite number, got " + text;
      });
  return [a] { return run_gradcheck(*a); };
}

}  // namespace cli
