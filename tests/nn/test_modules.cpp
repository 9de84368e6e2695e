// nn/ modules: parameter names and init, attention semantics (masks, fully masked rows), and a float64
// gradient check of every module, up to a whole CausalLM's loss with causal and padding masks.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

#include "common/random_tensor.h"
#include "nn/transformer.h"

using D = ag::Tensor<double>;
using testing::check_gradients;
using testing::random_tensor;
using Inputs = std::vector<D>;

namespace {

template <typename M>
std::vector<D> parameters_of(M& module) {
  std::vector<D> out;
  for (auto& p : module.named_parameters()) out.push_back(*p.tensor);
  return out;
}

// Gradcheck a module's output with respect to its input x (first) and every parameter.
template <typename M, typename F>
void check_module(M& module, D x, F forward) {
  std::vector<D> inputs{x};
  for (auto& p : parameters_of(module)) inputs.push_back(p);
  // LayerNorm starts at weight 1, bias 0, and Linear biases at 0: perturb them so every term matters.
  ag::Rng rng(99);
  for (size_t i = 1; i < inputs.size(); ++i)
    for (double& v : inputs[i].values()) v += 0.1 * rng.normal();
  check_gradients([&](const Inputs& in) { return forward(in[0]); }, inputs);
}

}  // namespace

BOOST_AUTO_TEST_CASE(causal_lm_parameters_have_the_checkpoint_names_of_design_md) {
  ag::Rng rng(1);
  nn::ModelShape s{11, 8, 16, 2, 2, 32, false};
  nn::CausalLM<float> model(s, rng);
  std::vector<std::string> names;
  for (auto& p : model.named_parameters()) names.push_back(p.name);
  const std::vector<std::string> first{
      "tok_emb.weight",          "pos_emb.weight",        "blocks.0.ln1.weight",     "blocks.0.ln1.bias",
      "blocks.0.attn.wq.weight", "blocks.0.attn.wq.bias", "blocks.0.attn.wk.weight", "blocks.0.attn.wk.bias",
      "blocks.0.attn.wv.weight", "blocks.0.attn.wv.bias", "blocks.0.attn.wo.weight", "blocks.0.attn.wo.bias",
      "blocks.0.ln2.weight",     "blocks.0.ln2.bias",     "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc1.bias",
      "blocks.0.mlp.fc2.weight", "blocks.0.mlp.fc2.bias"};
  BOOST_TEST(std::vector<std::string>(names.begin(), names.begin() + first.size()) == first,
             boost::test_tools::per_element());
  BOOST_TEST(names.back() == "lm_head.bias");
  BOOST_TEST(names[names.size() - 4] == "ln_f.weight");
  // vocab*d + max_len*d + layers*(2 LN + 4 attn + mlp) + ln_f + lm_head
  const int64_t per_block = 2 * 16 + 4 * (16 * 16 + 16) + 2 * 16 + (32 * 16 + 32) + (16 * 32 + 16);
  BOOST_TEST(model.parameter_count() == 11 * 16 + 8 * 16 + 2 * per_block + 2 * 16 + 11 * 16 + 11);
}

// Tied embeddings: lm_head reads tok_emb's weight, has no weight parameter of its own, and the one
// parameter's gradient is the sum of both uses (the whole-model gradcheck below checks the sum).
BOOST_AUTO_TEST_CASE(tied_embeddings_share_one_parameter) {
  ag::Rng rng(1), untied_rng(1);
  nn::ModelShape s{11, 8, 16, 2, 2, 32, false};
  nn::CausalLM<float> untied(s, untied_rng);
  s.tie_embeddings = true;
  nn::CausalLM<float> model(s, rng);
  BOOST_TEST(&model.lm_head.weight == &model.tok_emb.weight);
  std::vector<std::string> names;
  for (auto& p : model.named_parameters()) names.push_back(p.name);
  BOOST_TEST(std::count(names.begin(), names.end(), "lm_head.weight") == 0);
  BOOST_TEST(names.back() == "lm_head.bias");
  BOOST_TEST(model.parameter_count() == untied.parameter_count() - 11 * 16);
  // The draws before lm_head are the untied model's: tying changes nothing else.
  BOOST_TEST(model.tok_emb.weight.values() == untied.tok_emb.weight.values());
  BOOST_TEST(model.blocks[1]->mlp->fc2.weight.values() == untied.blocks[1]->mlp->fc2.weight.values());
}

BOOST_AUTO_TEST_CASE(xavier_init_has_the_lesson_std_and_is_seeded) {
  ag::Rng a(42), b(42);
  nn::Linear<double> la(200, 300, a), lb(200, 300, b);
  BOOST_TEST(la.weight.values() == lb.weight.values());
  double sq = 0;
  for (double v : la.weight.values()) sq += v * v;
  const double std = std::sqrt(sq / la.weight.numel());
  BOOST_TEST(std == std::sqrt(2.0 / 500.0), boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(attention_rows_sum_to_one_and_respect_the_causal_mask) {
  D q = random_tensor({2, 5, 4}, 1, 1.0, 0.0, false), k = random_tensor({2, 5, 4}, 2, 1.0, 0.0, false);
  D v = random_tensor({2, 5, 3}, 3, 1.0, 0.0, false);
  auto r = nn::scaled_dot_product_attention(q, k, v, nn::causal_mask<double>(5));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i) {
      double row = 0;
      for (int64_t j = 0; j < 5; ++j) {
        const double w = r.weights.data()[(b * 5 + i) * 5 + j];
        row += w;
        if (j > i) BOOST_TEST(w == 0.0);
      }
      BOOST_TEST(row == 1.0, boost::test_tools::tolerance(1e-12));
    }
  // Row 0 under the causal mask can only look at key 0: its output is v[0].
  for (int64_t c = 0; c < 3; ++c)
    BOOST_TEST(r.output.data()[c] == v.data()[c], boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_fully_masked_row_gives_zero_output_and_zero_gradient) {
  D q = random_tensor({3, 4}, 4), k = random_tensor({3, 4}, 5), v = random_tensor({3, 2}, 6);
  D mask = D::from({3, 3}, {0, 1, 1, 1, 1, 1, 0, 0, 1});  // query 1 sees nothing
  auto r = nn::scaled_dot_product_attention(q, k, v, mask);
  for (int64_t c = 0; c < 2; ++c) BOOST_TEST(r.output.data()[2 + c] == 0.0);
  for (double w : r.weights.values()) BOOST_TEST(std::isfinite(w));
  ag::sum(r.output).backward();
  for (int64_t c = 0; c < 4; ++c) BOOST_TEST(q.grad()[4 + c] == 0.0);
  const D dk = k.grad_tensor();  // named: a range-for over a temporary's values would read freed memory
  for (double g : dk.values()) BOOST_TEST(std::isfinite(g));
  check_gradients(
      [&](const Inputs& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], mask).output; },
      {random_tensor({3, 4}, 7), random_tensor({3, 4}, 8), random_tensor({3, 2}, 9)});
}

BOOST_AUTO_TEST_CASE(gradcheck_scaled_dot_product_attention_with_causal_padding_and_per_head_masks) {
  auto qkv = [](uint64_t s) {
    return Inputs{random_tensor({2, 2, 4, 3}, s), random_tensor({2, 2, 4, 3}, s + 1),
                  random_tensor({2, 2, 4, 2}, s + 2)};
  };
  const D causal = nn::causal_mask<double>(4);
  const D padding = nn::padding_mask<double>({0, 0, 0, 1, 0, 0, 1, 1}, 2, 4);
  const D per_head = D::from({2, 2, 4, 4}, std::vector<double>(64, 0.0));
  for (const D& mask : {D(), causal, padding, ag::add(causal, padding), per_head})
    check_gradients(
        [&](const Inputs& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], mask).output; },
        qkv(10));
  // The weights are an output too, and are differentiable.
  check_gradients(
      [&](const Inputs& in) { return nn::scaled_dot_product_attention(in[0], in[1], in[2], causal).weights; },
      qkv(20));
}

BOOST_AUTO_TEST_CASE(gradcheck_linear_embedding_layernorm_mlp) {
  ag::Rng rng(3);
  nn::Linear<double> lin(4, 3, rng);
  check_module(lin, random_tensor({2, 5, 4}, 30), [&](const D& x) { return lin.forward(x); });
  nn::LayerNorm<double> ln(6);
  check_module(ln, random_tensor({3, 6}, 31), [&](const D& x) { return ln.forward(x); });
  nn::RMSNorm<double> rms(6);
  for (double& w : rms.weight.values()) w += 0.1 * rng.normal();
  check_module(rms, random_tensor({3, 6}, 33), [&](const D& x) { return rms.forward(x); });
  // Its one parameter is a norm's gain: not weight-decayed, no bias.
  BOOST_TEST(rms.named_parameters().size() == 1u);
  BOOST_TEST(rms.named_parameters()[0].name == "weight");
  BOOST_TEST((rms.named_parameters()[0].kind == nn::ParamKind::kNorm));
  nn::MLP<double> mlp(4, 8, rng);
  check_module(mlp, random_tensor({2, 3, 4}, 32), [&](const D& x) { return mlp.forward(x); });
  BOOST_TEST(!mlp.gate);
  for (nn::Activation a :
       {nn::Activation::relu2, nn::Activation::swiglu, nn::Activation::geglu, nn::Activation::gelu_erf}) {
    nn::MLP<double> m(4, 8, rng, a);
    BOOST_TEST(bool(m.gate) == nn::mlp_gated(a));
    BOOST_TEST(m.named_parameters().size() == (nn::mlp_gated(a) ? 6u : 4u));
    if (m.gate) BOOST_TEST(m.named_parameters()[2].name == "gate.weight");  // fc1, gate, fc2
    check_module(m, random_tensor({2, 3, 4}, 34), [&](const D& x) { return m.forward(x); });
  }
  nn::Embedding<double> emb(5, 3, rng);
  check_gradients([&](const Inputs&) { return emb.forward({0, 4, 4, 2}, {2, 2}); }, {emb.weight});
}

BOOST_AUTO_TEST_CASE(gradcheck_self_attention_and_multihead_attention) {
  ag::Rng rng(4);
  nn::SelfAttention<double> sa(8, 4, 4, rng);
  check_module(sa, random_tensor({6, 8}, 40),
               [&](const D& x) { return sa.forward(x, nn::causal_mask<double>(6)).output; });
  nn::MultiHeadAttention<double> mha(8, 2, rng);
  check_module(mha, random_tensor({2, 5, 8}, 41),
               [&](const D& x) { return mha.forward(x, nn::causal_mask<double>(5)); });
}

BOOST_AUTO_TEST_CASE(gradcheck_transformer_blocks) {
  ag::Rng rng(5);
  nn::ModelShape s{7, 6, 8, 2, 1, 16, false};
  nn::ModelShape attention_only = s, bare = s;
  attention_only.attention_only = true;
  bare.norm = nn::NormKind::none, bare.activation = nn::Activation::relu, bare.bias = false;
  nn::ModelShape rms = s, relu2 = s, swiglu = s, geglu = s;
  rms.norm = nn::NormKind::rms;
  relu2.activation = nn::Activation::relu2;
  swiglu.activation = nn::Activation::swiglu, swiglu.norm = nn::NormKind::rms;  // Llama's pair
  geglu.activation = nn::Activation::geglu, geglu.bias = false;
  nn::ModelShape parallel = s, parallel_swiglu = swiglu;
  parallel.parallel = true, parallel_swiglu.parallel = true;
  for (const nn::ModelShape& shape :
       {s, attention_only, bare, rms, relu2, swiglu, geglu, parallel, parallel_swiglu}) {
    nn::TransformerBlock<double> block(shape, rng);
    check_module(block, random_tensor({2, 5, 8}, 50),
                 [&](const D& x) { return block.forward(x, nn::causal_mask<double>(5)); });
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_whole_causal_lm_loss_with_causal_and_padding_masks) {
  nn::ModelShape s{7, 6, 8, 2, 2, 16, false};
  nn::ModelShape bare = s;  // the grokking model's options
  bare.norm = nn::NormKind::none, bare.activation = nn::Activation::relu, bare.bias = false;
  nn::ModelShape rms = s;  // RMSNorm with Llama 1's eps
  rms.norm = nn::NormKind::rms, rms.norm_eps = 1e-6;
  nn::ModelShape relu2 = s, swiglu = s, geglu = s;
  relu2.activation = nn::Activation::relu2;
  swiglu.activation = nn::Activation::swiglu, swiglu.norm = nn::NormKind::rms,
  swiglu.bias = false;  // Llama's
  geglu.activation = nn::Activation::geglu;
  nn::ModelShape parallel = s, tied = s, softcap = s;
  parallel.parallel = true;
  tied.tie_embeddings = true;
  softcap.logit_softcap = 1.5;  // the perturbed logits reach past it: tanh is far from linear there
  nn::ModelShape all = swiglu;  // every option of this part of issue 41 together
  all.parallel = true, all.tie_embeddings = true, all.logit_softcap = 1.5;
  nn::ModelShape qwen = swiglu;  // Qwen2's: q/k/v biases only, one kv head shared by both query heads
  qwen.qkv_bias = true, qwen.n_kv_heads = 1;
  for (const nn::ModelShape& shape :
       {s, bare, rms, relu2, swiglu, geglu, parallel, tied, softcap, all, qwen}) {
    ag::Rng rng(6);
    nn::CausalLM<double> model(shape, rng);
    std::vector<D> params = parameters_of(model);
    for (auto& p : params)
      for (double& v : p.values()) v += 0.1 * rng.normal();
    const std::vector<int32_t> ids{1, 2, 3, 4, 5, 6, 5, 4, 0, 0};
    const std::vector<int32_t> targets{2, 3, -1, 5, 6, 5, 4, 3, -1, -1};
    const std::vector<uint8_t> padding{0, 0, 0, 0, 0, 0, 0, 0, 1, 1};  // the second sequence has length 3
    const ag::GradcheckResult r = ag::gradcheck(
        [&](const Inputs&) { return ag::cross_entropy(model.forward(ids, 2, 5, padding), targets, -1); },
        params);
    std::vector<std::string> names;
    for (auto& p : model.named_parameters()) names.push_back(p.name);
    BOOST_TEST_MESSAGE(r.report(names));
    BOOST_TEST(r.worst() < 1e-6, r.report(names));
  }
}
