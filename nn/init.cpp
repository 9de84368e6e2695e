#include "nn/init.h"

#include <cmath>

namespace nn {

template <typename T>
ag::Tensor<T> xavier_normal(const ag::Shape& shape, int64_t fan_in, int64_t fan_out, ag::Rng& rng) {
  ag::Tensor<T> t = ag::Tensor<T>::empty(shape, true);
  if (&rng == &allocate_only()) return t;
  const double std = std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  for (T& v : t.values()) v = static_cast<T>(rng.normal(0.0, std));
  return t;
}

ag::Rng& allocate_only() {
  static ag::Rng rng;
  return rng;
}

template ag::Tensor<float> xavier_normal<float>(const ag::Shape&, int64_t, int64_t, ag::Rng&);
template ag::Tensor<double> xavier_normal<double>(const ag::Shape&, int64_t, int64_t, ag::Rng&);

}  // namespace nn
