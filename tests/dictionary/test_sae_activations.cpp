// The BatchTopK and JumpReLU dictionaries (dictionary/sae.h; their ops, autograd/ops_dictionary.cpp, are
// checked in tests/autograd/test_dictionary_ops.cpp), in float64: the whole JumpReLU loss (MSE + L0) has
// finite-difference gradients for every weight and the definition's for log_threshold through the
// trainer's exp; each activation trains through `attograd sae`'s trainer with a loss that falls, saves its
// threshold, reloads it and fires about k features per token (BatchTopK); and a checkpoint resumes each
// bit-exactly.
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "common/temp_dir.h"
#include "dictionary/sae.h"

namespace {

double rect(double u) {
  return u > -0.5 && u < 0.5 ? 1.0 : 0.0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(jumprelu_loss_gradients_in_float64) {
  // An SAE of d_in 6, d_sae 10 on 12 tokens; thresholds trained as log_threshold through exp, as the
  // trainer does. Every weight's gradient by finite differences (no pre-activation crosses a threshold
  // within the step), log_threshold's by the definition: d L / d log theta_j = theta_j (d mse part + l0 d
  // step part), each from the kernel.
  const int64_t N = 12, D = 6, M = 10;
  const double bw = 0.05, l0 = 0.3;
  ag::Rng rng(7);
  auto randn = [&](ag::Shape s, double scale) {
    ag::Tensor<double> t = ag::Tensor<double>::empty(s);
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = scale * rng.normal();
    return t.set_requires_grad(true);
  };
  const ag::Tensor<double> x = randn({N, D}, 1.0).detach();
  dictionary::SaeParams<double> p{
      randn({D, M}, 0.5), randn({M}, 0.1), randn({M, D}, 0.4), randn({D}, 0.1), {}, false, {}};
  ag::Tensor<double> log_theta = ag::Tensor<double>::empty({M});
  for (int64_t j = 0; j < M; ++j) log_theta.data()[j] = std::log(0.05 + 0.05 * j);
  log_theta.set_requires_grad(true);
  p.threshold = ag::exp(log_theta);
  dictionary::SaeOutput<double> out =
      dictionary::sae_forward(p, x, dictionary::SaeActivation::jumprelu, l0, 0, {}, bw, true);
  out.loss.backward();
  const ag::GradcheckResult r = ag::gradcheck(
      [&](const std::vector<ag::Tensor<double>>& in) {
        dictionary::SaeParams<double> q{in[0], in[1], in[2], in[3], {}, false, ag::exp(log_theta.detach())};
        return dictionary::sae_forward(q, x, dictionary::SaeActivation::jumprelu, l0, 0, {}, bw, true).loss;
      },
      {p.W_enc.detach().set_requires_grad(true), p.b_enc.detach().set_requires_grad(true),
       p.W_dec.detach().set_requires_grad(true), p.b_dec.detach().set_requires_grad(true)});
  BOOST_TEST(r.worst() < 1e-6, r.report({"W_enc", "b_enc", "W_dec", "b_dec"}));
  // The definition: pre = (x - b_dec) W_enc + b_enc, f = pre [pre > theta], x_hat = f W_dec + b_dec,
  // mse = mean_n |x_hat - x|^2; dmse/df = 2/N (x_hat - x) W_dec^T.
  double worst = 0, total = 0;
  const ag::Tensor<double> dlog = log_theta.grad_tensor();
  for (int64_t j = 0; j < M; ++j) {
    const double theta = std::exp(log_theta.data()[j]);
    double g = 0;
    for (int64_t n = 0; n < N; ++n) {
      double pre = p.b_enc.data()[j];
      for (int64_t d = 0; d < D; ++d)
        pre += (x.data()[n * D + d] - p.b_dec.data()[d]) * p.W_enc.data()[d * M + j];
      double df = 0;
      for (int64_t d = 0; d < D; ++d)
        df += 2.0 / N * (out.x_hat.data()[n * D + d] - x.data()[n * D + d]) * p.W_dec.data()[j * D + d];
      const double k = rect((pre - theta) / bw);
      g += -(theta / bw) * k * df + l0 / N * (-(1.0 / bw)) * k;
    }
    g *= theta;  // d theta / d log theta
    total += std::abs(g);
    worst = std::max(worst, std::abs(dlog.data()[j] - g));
  }
  BOOST_TEST(total > 0.0);
  BOOST_TEST(worst < 1e-10, "log_threshold gradient vs its definition: " << worst);
}

BOOST_AUTO_TEST_CASE(batchtopk_and_jumprelu_train_save_and_reload) {
  // A synthetic stream: 24-dimensional tokens, each a sum of 3 of 48 fixed directions with positive weights.
  const int64_t D = 24, F = 48, N = 256;
  ag::Rng rng(3);
  std::vector<float> dirs(F * D);
  for (float& v : dirs) v = static_cast<float>(rng.normal());
  auto batch = [&](uint64_t seed) {
    ag::Rng r(seed);
    ag::Tensor<float> x = ag::Tensor<float>::zeros({N, D});
    for (int64_t n = 0; n < N; ++n)
      for (int k = 0; k < 3; ++k) {
        const int64_t f = static_cast<int64_t>(r.uniform() * F) % F;
        const float a = static_cast<float>(0.5 + r.uniform());
        for (int64_t d = 0; d < D; ++d) x.data()[n * D + d] += a * dirs[f * D + d];
      }
    return x;
  };
  testing::TempDir tmp;
  for (const auto act : {dictionary::SaeActivation::batchtopk, dictionary::SaeActivation::jumprelu}) {
    dictionary::SaeConfig c;
    c.activation = act;
    c.d_sae = 96;
    c.k = 4;
    c.steps = 400;
    c.batch_size = N;
    c.resample_every = 0;
    c.lr = 3e-3;
    c.l0_coefficient = 1.0;
    c.jumprelu_bandwidth = 0.05;
    c.jumprelu_init_threshold = 0.5;
    dictionary::SaeTrainer t(c, D, {}, 1.f);
    float first = 0, last = 0, first_l0 = 0, last_l0 = 0;
    for (int64_t s = 0; s < c.steps; ++s) {
      const auto r = t.step(batch(100 + s));
      if (s == 0) first = r.mse, first_l0 = r.l0;
      last = r.mse, last_l0 = r.l0;
    }
    const char* name = act == dictionary::SaeActivation::jumprelu ? "jumprelu" : "batchtopk";
    BOOST_TEST(last < 0.3 * first, name << ": mse " << first << " -> " << last);
    // Inference through the threshold on held-out tokens: explained variance and L0.
    const dictionary::SaeParams<float> raw = t.raw_params();
    BOOST_TEST_REQUIRE(raw.threshold.defined());
    const std::string path = tmp.file(std::string(name) + ".safetensors");
    dictionary::write_sae_file(path, raw, {});
    const dictionary::SaeParams<float> back = dictionary::load_sae(path);
    BOOST_TEST_REQUIRE(back.threshold.defined());
    BOOST_TEST(back.threshold.to_vector() == raw.threshold.to_vector());
    const ag::Tensor<float> x = batch(7);
    ag::NoGradScope no_grad;
    const dictionary::SaeOutput<float> o = dictionary::sae_forward(back, x, act, 0.f, c.k);
    double l0 = 0, err = 0, var = 0;
    std::vector<double> mean(D, 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) mean[d] += x.data()[n * D + d] / N;
    for (int64_t i = 0; i < o.f.numel(); ++i) l0 += o.f.data()[i] > 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        const double e = o.x_hat.data()[n * D + d] - x.data()[n * D + d], v = x.data()[n * D + d] - mean[d];
        err += e * e;
        var += v * v;
      }
    l0 /= N;
    const double ev = 1 - err / var;
    BOOST_TEST_MESSAGE(name << ": mse " << first << " -> " << last << ", L0 " << first_l0 << " -> " << last_l0
                            << ", held-out explained variance " << ev << ", L0 " << l0 << ", threshold[0] "
                            << back.threshold.data()[0]);
    BOOST_TEST(ev > 0.7, name << " explained variance " << ev);
    BOOST_TEST(l0 > 0.5);
    BOOST_TEST(l0 < 0.5 * c.d_sae);
    if (act ==
        dictionary::SaeActivation::jumprelu)  // the L0 penalty at work (BatchTopK's is k by construction)
      BOOST_TEST(last_l0 < 0.5 * first_l0, name << ": training L0 " << first_l0 << " -> " << last_l0);
    else
      BOOST_TEST(last_l0 == float(c.k));
    if (act == dictionary::SaeActivation::batchtopk) BOOST_TEST(std::abs(l0 - c.k) < 0.5 * c.k, "L0 " << l0);
  }
}

BOOST_AUTO_TEST_CASE(a_resumed_training_equals_an_uninterrupted_one) {
  // JumpReLU's log_threshold (and its AdamW moments) and BatchTopK's moving threshold are in the checkpoint:
  // 20 steps, a checkpoint, 20 more in a fresh trainer equal 40 in one.
  const int64_t D = 8, N = 64;
  auto batch = [&](uint64_t seed) {
    ag::Rng r(seed);
    ag::Tensor<float> x = ag::Tensor<float>::empty({N, D});
    for (int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(r.normal());
    return x;
  };
  testing::TempDir tmp;
  for (const auto act : {dictionary::SaeActivation::batchtopk, dictionary::SaeActivation::jumprelu}) {
    dictionary::SaeConfig c;
    c.activation = act;
    c.d_sae = 32;
    c.k = 3;
    c.steps = 40;
    c.batch_size = N;
    c.resample_every = 15;  // a resampling falls in each half
    c.warmup = 0;
    c.lr = 1e-2;
    c.jumprelu_bandwidth = 0.05;
    c.jumprelu_init_threshold = 0.1;
    dictionary::SaeTrainer whole(c, D, {}, 1.f), first(c, D, {}, 1.f), second(c, D, {}, 1.f);
    for (int s = 0; s < 40; ++s) whole.step(batch(s));
    for (int s = 0; s < 20; ++s) first.step(batch(s));
    const std::string path = tmp.file("checkpoint.safetensors");
    first.save_checkpoint(path, {});
    second.load_checkpoint(path);
    for (int s = 20; s < 40; ++s) second.step(batch(s));
    const dictionary::SaeParams<float> a = whole.raw_params(), b = second.raw_params();
    BOOST_TEST(a.W_enc.to_vector() == b.W_enc.to_vector());
    BOOST_TEST(a.W_dec.to_vector() == b.W_dec.to_vector());
    BOOST_TEST(a.b_enc.to_vector() == b.b_enc.to_vector());
    BOOST_TEST_REQUIRE(a.threshold.defined());
    BOOST_TEST(a.threshold.to_vector() == b.threshold.to_vector());
    double moved = 0;  // the threshold left its start
    for (const float t : a.threshold.to_vector())
      moved = std::max(moved, std::abs(t - (act == dictionary::SaeActivation::jumprelu ? 0.1 : 0.0)));
    BOOST_TEST(moved > 1e-3);
  }
}
