// AdamW and gradient clipping: the clip folded into AdamW's pass (as the trainer runs it) gives the same
// bits as scaling the gradients first, and clip_factor is the ratio the clip promises. Weight decay follows
// the kind each module declares for its parameters: train.decay "weights" decays exactly the weight
// matrices (never biases, norms or embeddings), "all" every parameter.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "train/optimizer.h"
#include "train/training_step.h"

namespace {

// Two parameters (one with weight decay) whose gradients are `grad_size` times a fixed random pattern:
// backward of sum(w * c) leaves c in w's gradient.
struct Params {
  std::vector<ag::Tensor<float>> tensors;
  std::vector<train::OptimParam> list;

  explicit Params(float grad_size) {
    ag::Rng rng(3);
    auto random = [&](const ag::Shape& shape, float size) {
      std::vector<float> values(static_cast<size_t>(ag::numel_of(shape)));
      for (float& v : values) v = size * static_cast<float>(rng.normal());
      return values;
    };
    tensors.push_back(ag::Tensor<float>::from({300, 7}, random({300, 7}, 1.0f), true));
    tensors.push_back(ag::Tensor<float>::from({2500}, random({2500}, 1.0f), true));
    list = {{"w", &tensors[0], true}, {"b", &tensors[1], false}};
    coefficients = {ag::Tensor<float>::from({300, 7}, random({300, 7}, grad_size)),
                    ag::Tensor<float>::from({2500}, random({2500}, grad_size))};
  }

  void backward() {
    for (auto& t : tensors) t.zero_grad();
    for (size_t i = 0; i < tensors.size(); ++i) ag::sum(ag::mul(tensors[i], coefficients[i])).backward();
  }

  std::vector<ag::Tensor<float>> coefficients;
};

}  // namespace

BOOST_AUTO_TEST_CASE(clip_factor_scales_to_the_limit_only_above_it) {
  BOOST_TEST(train::clip_factor(4.0, 1.0) == static_cast<float>(1.0 / (4.0 + 1e-6)));
  BOOST_TEST(train::clip_factor(0.5, 1.0) == 1.0f);
  BOOST_TEST(train::clip_factor(4.0, 0.0) == 1.0f);  // 0: no clipping
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_leaves_the_norm_at_the_limit) {
  Params p(0.5f);
  p.backward();
  const double before = train::grad_norm(p.list);
  BOOST_TEST(before > 2.0);
  BOOST_TEST(train::clip_grad_norm(p.list, 2.0) == before);
  BOOST_TEST(train::grad_norm(p.list) == 2.0, boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(the_clip_folded_into_adamw_gives_the_same_bits_as_clipping_first) {
  for (float grad_size : {0.5f, 1e-4f}) {  // the clip applies, then it does not
    Params scaled_first(grad_size), folded(grad_size);
    train::AdamW opt_a(scaled_first.list, 0.1), opt_b(folded.list, 0.1);
    for (int step = 0; step < 3; ++step) {
      scaled_first.backward();
      folded.backward();
      const double norm_a = train::clip_grad_norm(scaled_first.list, 1.0);
      opt_a.step(1e-2);
      const double norm_b = train::grad_norm(folded.list);
      opt_b.step(1e-2, train::clip_factor(norm_b, 1.0));
      BOOST_TEST(norm_a == norm_b);
    }
    for (size_t i = 0; i < 2; ++i) {
      const ag::Tensor<float>&a = scaled_first.tensors[i], &b = folded.tensors[i];
      BOOST_TEST(std::vector<float>(a.data(), a.data() + a.numel()) ==
                     std::vector<float>(b.data(), b.data() + b.numel()),
                 boost::test_tools::per_element());
      BOOST_TEST(opt_a.first_moments()[i] == opt_b.first_moments()[i], boost::test_tools::per_element());
      BOOST_TEST(opt_a.second_moments()[i] == opt_b.second_moments()[i], boost::test_tools::per_element());
    }
  }
}

namespace {

// The model shapes whose parameter lists differ: the default, attention-only, and the grokking model's
// options (no norm, ReLU, no biases).
std::vector<nn::ModelShape> shapes() {
  nn::ModelShape s;
  s.vocab = 11, s.max_len = 6, s.d_model = 8, s.n_heads = 2, s.n_layers = 2, s.d_ff = 16;
  nn::ModelShape attention_only = s, bare = s;
  attention_only.attention_only = true;
  bare.norm = nn::NormKind::none, bare.activation = nn::Activation::relu, bare.bias = false;
  return {s, attention_only, bare};
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The weight matrices of a model of this shape, by name: what train.decay "weights" decays.
std::set<std::string> weight_matrices(const nn::ModelShape& s) {
  std::set<std::string> names = {"lm_head.weight"};
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string block = "blocks." + std::to_string(l) + ".";
    for (const char* w : {"wq", "wk", "wv", "wo"}) names.insert(block + "attn." + w + ".weight");
    if (!s.attention_only)
      for (const char* fc : {"fc1", "fc2"}) names.insert(block + "mlp." + fc + ".weight");
  }
  return names;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_parameter_declares_its_kind) {
  for (const nn::ModelShape& s : shapes()) {
    ag::Rng rng(1);
    const nn::CausalLM<float> model(s, rng);
    const std::set<std::string> weights = weight_matrices(s);
    int kinds[4] = {0, 0, 0, 0};
    for (const auto& p : model.named_parameters()) {
      nn::ParamKind expected = nn::ParamKind::kWeight;
      if (p.name == "tok_emb.weight" || p.name == "pos_emb.weight") {
        expected = nn::ParamKind::kEmbedding;
      } else if (p.name.find(".ln1.") != std::string::npos || p.name.find(".ln2.") != std::string::npos ||
                 p.name.rfind("ln_f.", 0) == 0) {
        expected = nn::ParamKind::kNorm;
      } else if (ends_with(p.name, ".bias")) {
        expected = nn::ParamKind::kBias;
      }
      BOOST_TEST((p.kind == expected), p.name);
      BOOST_TEST((p.kind == nn::ParamKind::kWeight) == (weights.count(p.name) == 1), p.name);
      ++kinds[static_cast<int>(p.kind)];
    }
    BOOST_TEST(kinds[static_cast<int>(nn::ParamKind::kEmbedding)] == 2);
    BOOST_TEST(kinds[static_cast<int>(nn::ParamKind::kWeight)] == static_cast<int>(weights.size()));
    BOOST_TEST((kinds[static_cast<int>(nn::ParamKind::kBias)] > 0) == s.bias);
    BOOST_TEST((kinds[static_cast<int>(nn::ParamKind::kNorm)] > 0) == nn::has_norm(s.norm));
  }
}

BOOST_AUTO_TEST_CASE(the_training_step_decays_the_weight_matrices_or_everything) {
  for (const nn::ModelShape& s : shapes()) {
    for (const std::string decay : {"weights", "all"}) {
      train::Config c;
      c.task.length = 3;
      c.model = s;
      c.model.vocab = 0, c.model.max_len = 0;  // the task's
      c.train.decay = decay;
      const train::Config config = train::from_json(train::to_json(c));
      train::TrainingStep step(config);
      const std::set<std::string> weights = weight_matrices(s);
      size_t decayed = 0;
      for (const train::OptimParam& p : step.optimizer().params()) {
        BOOST_TEST(p.decay == (decay == "all" || weights.count(p.name) == 1), decay << " " << p.name);
        decayed += p.decay;
      }
      BOOST_TEST(decayed == (decay == "all" ? step.optimizer().params().size() : weights.size()));
    }
  }
}
