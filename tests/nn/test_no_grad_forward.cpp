// A forward pass under ag::NoGradScope (evaluation, the study tools, `attograd bench --forward`) records
// no graph and allocates no gradient buffers, and gives the same logits as a forward that records one.
#include <boost/test/unit_test.hpp>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/transformer.h"

namespace {

nn::ModelShape shape() {
  nn::ModelShape s;
  s.vocab = 11;
  s.max_len = 8;
  s.d_model = 16;
  s.n_heads = 2;
  s.n_layers = 2;
  s.d_ff = 32;
  return s;
}

std::vector<int32_t> ids(int64_t n) {
  std::vector<int32_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>((i * 7 + 3) % 11);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_forward_without_gradients_records_no_graph_and_no_gradient_buffers) {
  ag::Rng rng(5);
  nn::CausalLM<float> model(shape(), rng);
  const int64_t B = 3, T = 8;
  const std::vector<int32_t> tokens = ids(B * T);

  ag::Tensor<float> plain;
  {
    ag::NoGradScope no_grad;
    plain = model.forward(tokens, B, T);
  }
  BOOST_TEST(!plain.requires_grad());
  BOOST_TEST(plain.node()->inputs.empty());  // nothing links the logits to the ops that made them
  BOOST_TEST(!plain.node()->backward);
  BOOST_TEST(!plain.has_grad());
  for (const auto& p : model.named_parameters()) BOOST_TEST(!p.tensor->has_grad(), p.name);

  // The same forward recording a graph: the logits hang off it, and a backward fills the gradients (so the
  // checks above can fail); the values are the same bits.
  ag::Tensor<float> recorded = model.forward(tokens, B, T);
  BOOST_TEST(recorded.requires_grad());
  BOOST_TEST(!recorded.node()->inputs.empty());
  BOOST_TEST(plain.to_vector() == recorded.to_vector());
  ag::sum(recorded).backward();
  for (const auto& p : model.named_parameters()) BOOST_TEST(p.tensor->has_grad(), p.name);
}
