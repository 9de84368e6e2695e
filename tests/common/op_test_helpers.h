// Helpers shared by the op tests: elementwise comparison against reference values, the float32 copy of a
// float64 tensor, and the error-message checks. Random inputs and the gradcheck assertion come from
// random_tensor.h.
#pragma once

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "common/random_tensor.h"

namespace testing {

// The float32 copy of a float64 tensor (for checking the float32 path against float64).
inline ag::Tensor<float> to_float(const ag::Tensor<double>& t, bool requires_grad = true) {
  return ag::Tensor<float>::from(t.shape(), std::vector<float>(t.values().begin(), t.values().end()),
                                 requires_grad);
}

// |got[i] - want[i]| <= tol * max(1, |want[i]|) for every i; `what` names the values in the message.
template <typename Got, typename Want = std::vector<double>>
void check_close(const Got& got, const Want& want, double tol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_CHECK_MESSAGE(
        std::abs(static_cast<double>(got[i]) - want[i]) <= tol * std::max(1.0, std::abs(want[i])),
        what << "[" << i << "]: got " << got[i] << ", want " << want[i]);
}

template <typename Buffer>
bool all_finite(const Buffer& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// The message of the std::invalid_argument f throws, or a note that it threw none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no std::invalid_argument thrown)";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace testing
