// Central differences against backward(), in float64.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
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
      // The central difference of element i with step h: d + c h^2 + O(h^4), d the derivative.
      auto central = [&](int64_t i, double h) {
        const double saved = x.data()[i];
        x.data()[i] = saved + h;
        const double plus = objective();
        x.data()[i] = saved - h;
        const double minus = objective();
        x.data()[i] = saved;
        return (plus - minus) / (2 * h);
      };
      auto relative = [&](int64_t i, double numeric) {
        return std::abs(analytic[i] - numeric) /
               std::max({std::abs(analytic[i]), std::abs(numeric), options.floor});
      };
      // The elements checked: all, or max_elements of them (a partial Fisher-Yates shuffle from the seed).
      std::vector<int64_t> order(static_cast<size_t>(x.numel()));
      std::iota(order.begin(), order.end(), int64_t{0});
      size_t count = order.size();
      if (options.max_elements > 0 && static_cast<size_t>(options.max_elements) < count) {
        count = static_cast<size_t>(options.max_elements);
        std::mt19937_64 pick(options.seed + 1 + result.worst_rel_error.size());  // one stream per input
        for (size_t k = 0; k < count; ++k) std::swap(order[k], order[k + pick() % (order.size() - k)]);
      }
      for (size_t k = 0; k < count; ++k) {
        const int64_t i = order[k];
        double numeric = central(i, options.eps);
        // Richardson's step: where D(h)'s error is truncation, c h^2, D(h/2)'s is a quarter of it, and
        // (4 D(h/2) - D(h)) / 3 cancels it, leaving O(h^4). Taken only where D(h) disagrees with backward by
        // more than refine_above and the error does shrink so (to between 0.15 and 0.35 of itself): a kink
        // (relu) or round-off does not, and neither does a wrong gradient's error, which stays.
        if (relative(i, numeric) > options.refine_above) {
          const double half = central(i, options.eps / 2);
          const double shrink = (half - analytic[i]) / (numeric - analytic[i]);
          if (shrink > 0.15 && shrink < 0.35) numeric = (4 * half - numeric) / 3;
        }
        const double rel = relative(i, numeric);
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
