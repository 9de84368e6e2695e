// Test helpers: seeded random tensors for gradient checks, and the gradcheck assertion every op test uses.
#pragma once

#include <boost/test/unit_test.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/random.h"
#include "autograd/tensor.h"

namespace testing {

// Normal values with the given std, shifted by `offset` (to keep inputs away from kinks or log(0)).
inline ag::Tensor<double> random_tensor(const ag::Shape& shape, uint64_t seed, double std = 1.0,
                                        double offset = 0.0, bool requires_grad = true) {
  ag::Rng rng(seed);
  ag::Tensor<double> t = ag::Tensor<double>::empty(shape, requires_grad);
  for (double& v : t.values()) v = offset + rng.normal(0.0, std);
  return t;
}

// Checks f's float64 gradients at `inputs` against finite differences; `name` labels the log line and the
// failure message.
inline void check_gradients(
    const std::string& name,
    const std::function<ag::Tensor<double>(const std::vector<ag::Tensor<double>>&)>& f,
    std::vector<ag::Tensor<double>> inputs, double tolerance = 1e-6) {
  const ag::GradcheckResult r = ag::gradcheck(f, std::move(inputs));
  const std::string label = name.empty() ? "gradcheck" : "gradcheck " + name;
  BOOST_TEST_MESSAGE(label << ": worst relative error " << r.worst() << "\n" << r.report());
  BOOST_TEST(r.worst() < tolerance, label << ": worst relative error " << r.worst() << "\n" << r.report());
}

inline void check_gradients(
    const std::function<ag::Tensor<double>(const std::vector<ag::Tensor<double>>&)>& f,
    std::vector<ag::Tensor<double>> inputs, double tolerance = 1e-6) {
  check_gradients("", f, std::move(inputs), tolerance);
}

}  // namespace testing
