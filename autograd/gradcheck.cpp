// Central differences against backward(), in float64.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/random.h"

namespace ag {

double GradcheckResult::worst() const {
  double w = 0;
  for (double e : worst_rel_error) w = std::max(w, e);
  return w;
}

std::string GradcheckResult::report(const std::vector<std::string>& names) const {
  std::string out;
  char line[256];
  for (size_t i = 0; i < worst_rel_error.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "input " + std::to_string(i);
    std::snprintf(line, sizeof line, "%-40s worst relative error %.3e (element %lld)\n", name.c_str(),
                  worst_rel_error[i], static_cast<long long>(worst_index[i]));
    out += line;
  }
  return out;
}

GradcheckResult gradcheck(const std::function<Tensor<double>(const std::vector<Tensor<double>>&)>& f,
                          std::vector<Tensor<double>> inputs, const GradcheckOptions& options) {
  // The projection weights are drawn once, from the output's size, so every evaluation uses the same ones.
  std::vector<double> weights;
  auto projected = [&](bool record) {
    Tensor<double> out;
    if (record) {
      out = f(inputs);
    } else {
      NoGradScope no_grad;
      out = f(inputs);
    }
    if (weights.empty()) {
      Rng rng(options.seed);
      weights.resize(out.numel());
      for (double& w : weights) w = rng.normal();
    }
    if (static_cast<size_t>(out.numel()) != weights.size())
      throw std::logic_error("gradcheck: output size changed between evaluations");
    return out;
  };

  // Analytic: backward of the projection, seeded with the weights.
  for (auto& x : inputs) x.zero_grad();
  Tensor<double> out = projected(true);
  if (!out.requires_grad())
    throw std::logic_error("gradcheck: output does not depend on any input with grad");
  out.backward(weights);

  auto objective = [&]() {
    Tensor<double> o = projected(false);
    double s = 0;
    for (int64_t i = 0; i < o.numel(); ++i) s += weights[i] * o.data()[i];
    return s;
  };

  GradcheckResult result;
  for (auto& x : inputs) {
    double worst = 0;
    int64_t worst_at = -1;
    if (x.requires_grad()) {
      const std::vector<double> analytic = x.grad_tensor().to_vector();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double saved = x.data()[i];
        x.data()[i] = saved + options.eps;
        const double plus = objective();
        x.data()[i] = saved - options.eps;
        const double minus = objective();
        x.data()[i] = saved;
        const double numeric = (plus - minus) / (2 * options.eps);
        const double denom = std::max({std::abs(analytic[i]), std::abs(numeric), options.floor});
        const double rel = std::abs(analytic[i] - numeric) / denom;
        if (!(rel <= worst)) {  // also catches NaN
          worst = std::isnan(rel) ? INFINITY : rel;
          worst_at = i;
        }
      }
    }
    result.worst_rel_error.push_back(worst);
    result.worst_index.push_back(worst_at);
  }
  return result;
}

}  // namespace ag
