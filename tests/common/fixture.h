// Reads the PyTorch reference fixtures (tests/fixtures/, format attograd-fixture/1) and compares tensors
// the way tests/fixtures/README.md prescribes: |ours - ref| <= rtol * max|ref| + atol over the tensor.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "autograd/tensor.h"

namespace testing {

class Fixture {
 public:
  explicit Fixture(const std::string& name) {
    const std::string path = std::string(ATTOGRAD_SOURCE_DIR) + "/tests/fixtures/" + name;
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open");
    json_ = nlohmann::json::parse(in);
    if (json_.at("format") != "attograd-fixture/1") throw std::runtime_error(path + ": unknown format");
  }
  const nlohmann::json& meta() const { return json_.at("meta"); }
  bool has(const std::string& name) const { return json_.at("tensors").contains(name); }
  template <typename T>
  ag::Tensor<T> tensor(const std::string& name) const {
    const auto& t = json_.at("tensors").at(name);
    std::vector<T> data;
    for (double v : t.at("data")) data.push_back(static_cast<T>(v));
    return ag::Tensor<T>::from(t.at("shape").get<ag::Shape>(), std::move(data));
  }

 private:
  nlohmann::json json_;
};

// The worst |ours - ref| / max|ref| over a tensor (the README's measure, without atol), and whether it
// passes rtol/atol.
struct Difference {
  double max_abs = 0, ref_scale = 0;
  bool within(double rtol, double atol) const { return max_abs <= rtol * ref_scale + atol; }
  double relative() const { return ref_scale > 0 ? max_abs / ref_scale : max_abs; }
};

template <typename T>
Difference compare(const ag::Tensor<T>& ours, const ag::Tensor<double>& ref) {
  if (ours.shape() != ref.shape())
    throw std::runtime_error("shape " + ag::shape_str(ours.shape()) + " vs reference " +
                             ag::shape_str(ref.shape()));
  Difference d;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(static_cast<double>(ours.data()[i]) - ref.data()[i]));
    d.ref_scale = std::max(d.ref_scale, std::abs(ref.data()[i]));
  }
  return d;
}

}  // namespace testing
