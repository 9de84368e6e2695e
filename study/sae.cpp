#include "study/sae.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "autograd/gemm.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "io/json_error.h"
#include "train/safetensors.h"

namespace study {

namespace {

using json = nlohmann::json;

// Reads the fields of an SAE config, one at a time: a missing field keeps its default, a present one must
// have the type and range asked for.
class FieldReader {
 public:
  FieldReader(const json& j, const std::string& source) : j_(j), source_(source) {}

  template <typename V>
  void integer(const char* key, V& v, int64_t lo, int64_t hi) {
    const json* x = find(key);
    if (!x) return;
    if (!x->is_number_integer() && !(x->is_number_unsigned()))
      fail(key, "expected an integer, got " + describe(*x));
    if (x->is_number_unsigned() && x->get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                    x->dump());
    const int64_t n = x->get<int64_t>();
    if (n < lo || n > hi)
      fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                    x->dump());
    v = static_cast<V>(n);
  }
  void seed(const char* key, uint64_t& v) {
    const json* x = find(key);
    if (!x) return;
    if (!x->is_number_unsigned() && !(x->is_number_integer() && x->get<int64_t>() >= 0))
      fail(key, "expected a non-negative integer, got " + describe(*x));
    v = x->get<uint64_t>();
  }
  void number(const char* key, double& v, double lo, double hi, bool lo_open) {
    const json* x = find(key);
    if (!x) return;
    if (!x->is_number()) fail(key, "expected a number, got " + describe(*x));
    const double d = x->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
      fail(key, std::string("expected a number in ") + (lo_open ? "(" : "[") + json(lo).dump() + ", " +
                    json(hi).dump() + "], got " + x->dump());
    v = d;
  }
  void boolean(const char* key, bool& v) {
    const json* x = find(key);
    if (!x) return;
    if (!x->is_boolean()) fail(key, "expected true or false, got " + describe(*x));
    v = x->get<bool>();
  }
  void activation(const char* key, SaeActivation& v) {
    const json* x = find(key);
    if (!x) return;
    if (!x->is_string() || (*x != "relu" && *x != "topk"))
      fail(key, "expected \"relu\" or \"topk\", got " + x->dump());
    v = *x == "relu" ? SaeActivation::relu : SaeActivation::topk;
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    io::json_error(source_, std::string("/") + key, what);
  }

 private:
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  static std::string describe(const json& x) {
    return x.is_string() || x.is_boolean() || x.is_number() ? x.dump() : std::string(x.type_name());
  }
  const json& j_;
  const std::string& source_;
};

const std::vector<std::string>& sae_config_keys() {
  static const std::vector<std::string> keys = {
      "d_sae",    "expansion",      "activation",     "l1_coefficient",
      "k",        "steps",          "batch_size",     "lr",
      "warmup",   "weight_decay",   "resample_every", "buffer_tokens",
      "skip_bos", "eval_sequences", "top_examples",   "checkpoint_every",
      "seed"};
  return keys;
}

// The learning rate at `step` (from 0): linear warmup, then constant.
double sae_lr(const SaeConfig& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) return c.lr * static_cast<double>(step + 1) / c.warmup;
  return c.lr;
}

// The TopK mask of pre (N, d_sae): 1 where a pre-activation is not among its row's k largest (ties: the
// lower index wins), 0 where it is kept.
template <typename T>
ag::Tensor<T> topk_drop_mask(const ag::Tensor<T>& pre, int k) {
  const int64_t N = pre.size(0), M = pre.size(1);
  ag::Tensor<T> mask = ag::Tensor<T>::empty({N, M});
  const int64_t kk = std::min<int64_t>(k, M);
  ag::parallel_for(N, N * M * 4, [&](int64_t r0, int64_t r1) {
    std::vector<int32_t> order(static_cast<size_t>(M));  // one buffer per block of rows
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = pre.data() + r * M;
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin() + (kk - 1), order.end(),
                       [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      T* m = mask.data() + r * M;
      std::fill(m, m + M, T(1));
      for (int64_t i = 0; i < kk; ++i) m[order[i]] = T(0);
    }
  });
  return mask;
}

}  // namespace

SaeConfig sae_config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) io::json_error(source, "", std::string("expected an object, got ") + j.type_name());
  for (const auto& item : j.items())
    if (std::find(sae_config_keys().begin(), sae_config_keys().end(), item.key()) == sae_config_keys().end())
      io::json_error(source, "/" + item.key(), "unknown key");
  SaeConfig c;
  FieldReader r(j, source);
  r.integer("d_sae", c.d_sae, 0, 1 << 20);
  r.integer("expansion", c.expansion, 1, 256);
  r.activation("activation", c.activation);
  r.number("l1_coefficient", c.l1_coefficient, 0, 1e6, false);
  r.integer("k", c.k, 1, 1 << 16);
  r.integer("steps", c.steps, 1, int64_t(1) << 40);
  r.integer("batch_size", c.batch_size, 1, 1 << 20);
  r.number("lr", c.lr, 0, 10, true);
  r.integer("warmup", c.warmup, 0, 1 << 30);
  r.number("weight_decay", c.weight_decay, 0, 10, false);
  r.integer("resample_every", c.resample_every, 0, int64_t(1) << 40);
  r.integer("buffer_tokens", c.buffer_tokens, 1, int64_t(1) << 28);
  r.boolean("skip_bos", c.skip_bos);
  r.integer("eval_sequences", c.eval_sequences, 1, 1 << 20);
  r.integer("top_examples", c.top_examples, 1, 100);
  r.integer("checkpoint_every", c.checkpoint_every, 1, 1 << 30);
  r.seed("seed", c.seed);
  if (c.buffer_tokens < c.batch_size)
    r.fail("buffer_tokens", "expected at least batch_size (" + std::to_string(c.batch_size) + "), got " +
                                std::to_string(c.buffer_tokens));
  return c;
}

json sae_config_to_json(const SaeConfig& c) {
  return json{{"d_sae", c.d_sae},
              {"expansion", c.expansion},
              {"activation", c.activation == SaeActivation::relu ? "relu" : "topk"},
              {"l1_coefficient", c.l1_coefficient},
              {"k", c.k},
              {"steps", c.steps},
              {"batch_size", c.batch_size},
              {"lr", c.lr},
              {"warmup", c.warmup},
              {"weight_decay", c.weight_decay},
              {"resample_every", c.resample_every},
              {"buffer_tokens", c.buffer_tokens},
              {"skip_bos", c.skip_bos},
              {"eval_sequences", c.eval_sequences},
              {"top_examples", c.top_examples},
              {"checkpoint_every", c.checkpoint_every},
              {"seed", c.seed}};
}

SaeParams<float> init_sae(int64_t d_in, int64_t d_sae, ag::Rng& rng, const std::vector<float>& mean) {
  SaeParams<float> p;
  p.W_dec = ag::Tensor<float>::empty({d_sae, d_in});
  for (int64_t i = 0; i < p.W_dec.numel(); ++i) p.W_dec.data()[i] = static_cast<float>(rng.normal());
  normalize_decoder(p);
  p.W_enc = ag::transpose(p.W_dec).detach();
  p.b_enc = ag::Tensor<float>::zeros({d_sae});
  p.b_dec = mean.empty() ? ag::Tensor<float>::zeros({d_in}) : ag::Tensor<float>::from({d_in}, mean);
  for (ag::Tensor<float>* t : {&p.W_enc, &p.b_enc, &p.W_dec, &p.b_dec}) t->set_requires_grad(true);
  return p;
}

template <typename T>
ag::Tensor<T> relu_decode(const ag::Tensor<T>& pre, const ag::Tensor<T>& W) {
  if (pre.dim() != 2 || W.dim() != 2 || pre.size(1) != W.size(0))
    throw std::invalid_argument("relu_decode: expected pre (N, M) and W (M, D), got " +
                                ag::shape_str(pre.shape()) + " and " + ag::shape_str(W.shape()));
  const int64_t N = pre.size(0), M = pre.size(1), D = W.size(1);
  ag::Tensor<T> y = ag::Tensor<T>::zeros({N, D});
  {
    // y_n = sum over active j of pre_nj W_j
    ag::ConstMatMap<T> P(pre.data(), N, M), Wm(W.data(), M, D);
    ag::MatMap<T> Y(y.data(), N, D);
    ag::parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t j = 0; j < M; ++j)
          if (P(n, j) > T(0)) Y.row(n) += P(n, j) * Wm.row(j);
    });
  }
  if (ag::needs_grad<T>({&pre, &W}))
    ag::attach(y, "relu_decode", {pre.node_ptr(), W.node_ptr()}, [N, M, D](ag::Node<T>& node) {
      ag::ConstMatMap<T> P(node.inputs[0]->value.data(), N, M), Wm(node.inputs[1]->value.data(), M, D);
      ag::ConstMatMap<T> dy(node.grad.data(), N, D);
      const ag::detail::Grad<T> dpre(*node.inputs[0]);
      if (dpre) {
        // dpre_nj = [pre_nj > 0] dy_n . W_j
        ag::parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
          for (int64_t n = n0; n < n1; ++n) {
            T* row = dpre.data() + n * M;
            for (int64_t j = 0; j < M; ++j) {
              const T v = P(n, j) > T(0) ? dy.row(n).dot(Wm.row(j)) : T(0);
              row[j] = dpre.adds() ? row[j] + v : v;
            }
          }
        });
      }
      const ag::detail::Grad<T> dW(*node.inputs[1]);
      if (dW) {
        // dW_j = sum over the tokens n where j is active of pre_nj dy_n, in token order: the active
        // entries gathered by feature first, so each row of dW is one thread's.
        std::vector<int64_t> start(static_cast<size_t>(M + 1), 0);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < M; ++j) start[j + 1] += P(n, j) > T(0);
        for (int64_t j = 0; j < M; ++j) start[j + 1] += start[j];
        std::vector<int64_t> fill(start.begin(), start.end() - 1);
        std::vector<int32_t> token(static_cast<size_t>(start[M]));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < M; ++j)
            if (P(n, j) > T(0)) token[fill[j]++] = static_cast<int32_t>(n);
        ag::MatMap<T> dWm(dW.data(), M, D);
        ag::parallel_for(M, start[M] * D + M, [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) {
            if (!dW.adds()) dWm.row(j).setZero();
            for (int64_t i = start[j]; i < start[j + 1]; ++i) dWm.row(j) += P(token[i], j) * dy.row(token[i]);
          }
        });
      }
    });
  return y;
}

template <typename T>
ag::Tensor<T> sparse_grad_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& W, const ag::Tensor<T>& b) {
  if (x.dim() != 2 || W.dim() != 2 || b.dim() != 1 || x.size(1) != W.size(0) || b.size(0) != W.size(1))
    throw std::invalid_argument("sparse_grad_linear: expected x (N, D), W (D, M), b (M), got " +
                                ag::shape_str(x.shape()) + ", " + ag::shape_str(W.shape()) + " and " +
                                ag::shape_str(b.shape()));
  const int64_t N = x.size(0), D = x.size(1), M = W.size(1);
  ag::Tensor<T> y = ag::Tensor<T>::empty({N, M});
  ag::CStart<T> start;
  start.bias = b.data();
  ag::gemm<T>(N, M, D, ag::row_major(x.data(), D), ag::row_major(W.data(), M), y.data(), M, start);
  if (ag::needs_grad<T>({&x, &W, &b}))
    ag::attach(y, "sparse_grad_linear", {x.node_ptr(), W.node_ptr(), b.node_ptr()},
               [N, D, M](ag::Node<T>& node) {
                 const T* dy = node.grad.data();
                 const T* xv = node.inputs[0]->value.data();
                 const T* Wv = node.inputs[1]->value.data();
                 // The nonzero entries of dy, by row (for dx) and by column (for dW and db), each in
                 // ascending order.
                 std::vector<int64_t> row_start(static_cast<size_t>(N + 1), 0),
                     col_start(static_cast<size_t>(M + 1), 0);
                 for (int64_t n = 0; n < N; ++n)
                   for (int64_t j = 0; j < M; ++j)
                     if (dy[n * M + j] != T(0)) {
                       ++row_start[n + 1];
                       ++col_start[j + 1];
                     }
                 for (int64_t n = 0; n < N; ++n) row_start[n + 1] += row_start[n];
                 for (int64_t j = 0; j < M; ++j) col_start[j + 1] += col_start[j];
                 const int64_t nnz = row_start[N];
                 const bool sparse = nnz * 10 <= N * M;
                 const ag::detail::Grad<T> dx(*node.inputs[0]);
                 if (dx) {
                   if (!sparse) {
                     ag::gemm<T>(N, D, M, ag::row_major(dy, M), ag::row_major(Wv, M).transposed(), dx.data(),
                                 D, dx.adds());
                   } else {
                     // dx_n = sum over nonzero dy_nj of dy_nj W[:, j], with W transposed once so the rows are
                     // contiguous.
                     ag::Mat<T> Wt = ag::ConstMatMap<T>(Wv, D, M).transpose();
                     ag::MatMap<T> dX(dx.data(), N, D);
                     ag::parallel_for(N, nnz * D + N, [&](int64_t n0, int64_t n1) {
                       for (int64_t n = n0; n < n1; ++n) {
                         if (!dx.adds()) dX.row(n).setZero();
                         for (int64_t j = 0; j < M; ++j)
                           if (dy[n * M + j] != T(0)) dX.row(n) += dy[n * M + j] * Wt.row(j);
                       }
                     });
                   }
                 }
                 const ag::detail::Grad<T> dW(*node.inputs[1]);
                 if (dW) {
                   if (!sparse) {
                     ag::gemm<T>(D, M, N, ag::row_major(xv, D).transposed(), ag::row_major(dy, M), dW.data(),
                                 M, dW.adds());
                   } else {
                     // dW[:, j] = sum over nonzero dy_nj of dy_nj x_n, gathered by column into (M, D), then
                     // transposed.
                     std::vector<int64_t> fill(col_start.begin(), col_start.end() - 1);
                     std::vector<int32_t> token(static_cast<size_t>(nnz));
                     for (int64_t n = 0; n < N; ++n)
                       for (int64_t j = 0; j < M; ++j)
                         if (dy[n * M + j] != T(0)) token[fill[j]++] = static_cast<int32_t>(n);
                     ag::Mat<T> dWt(M, D);
                     ag::ConstMatMap<T> X(xv, N, D);
                     ag::parallel_for(M, nnz * D + M, [&](int64_t j0, int64_t j1) {
                       for (int64_t j = j0; j < j1; ++j) {
                         dWt.row(j).setZero();
                         for (int64_t i = col_start[j]; i < col_start[j + 1]; ++i)
                           dWt.row(j) += dy[token[i] * M + j] * X.row(token[i]);
                       }
                     });
                     dW.put(ag::MatMap<T>(dW.data(), D, M), dWt.transpose());
                   }
                 }
                 const ag::detail::Grad<T> db(*node.inputs[2]);
                 if (db) db.put(0, M, ag::ConstMatMap<T>(dy, N, M).colwise().sum().transpose().array());
               });
  return y;
}

template <typename T>
SaeOutput<T> sae_forward(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, T l1, int k) {
  if (x.dim() != 2 || x.size(1) != p.d_in())
    throw std::invalid_argument("sae_forward: x must be (N, " + std::to_string(p.d_in()) + ")");
  const int64_t N = x.size(0);
  SaeOutput<T> out;
  ag::Tensor<T> pre = sparse_grad_linear(ag::sub(x, p.b_dec), p.W_enc, p.b_enc);  // (N, d_sae)
  if (act == SaeActivation::topk) pre = ag::masked_fill(pre, topk_drop_mask(pre, k), T(0));
  out.f = ag::relu(pre);
  out.x_hat = relu_decode(pre, p.W_dec) + p.b_dec;  // (N, d_in)
  const ag::Tensor<T> diff = out.x_hat - x;
  out.mse = ag::scale(ag::sum(diff * diff), T(1) / static_cast<T>(N));
  out.sparsity = ag::scale(ag::sum(out.f), T(1) / static_cast<T>(N));
  out.loss = act == SaeActivation::relu ? out.mse + ag::scale(out.sparsity, l1) : out.mse;
  return out;
}

void normalize_decoder(SaeParams<float>& p) {
  auto W = ag::MatMap<float>(p.W_dec.data(), p.W_dec.size(0), p.W_dec.size(1));
  for (int64_t r = 0; r < W.rows(); ++r) {
    const float n = W.row(r).norm();
    if (n > 0) W.row(r) /= n;
  }
}

SaeTrainer::SaeTrainer(const SaeConfig& config, int64_t d_in, const std::vector<float>& data_mean)
    : config_(config),
      p_([&] {
        ag::Rng rng(config.seed);
        return init_sae(d_in, config.features(d_in), rng, data_mean);
      }()),
      optimizer_({{"W_enc", &p_.W_enc, true},
                  {"b_enc", &p_.b_enc, false},
                  {"W_dec", &p_.W_dec, true},
                  {"b_dec", &p_.b_dec, false}},
                 config.weight_decay),
      fired_(static_cast<size_t>(p_.d_sae()), 0) {}

SaeTrainer::StepResult SaeTrainer::step(const ag::Tensor<float>& x) {
  for (ag::Tensor<float>* t : {&p_.W_enc, &p_.b_enc, &p_.W_dec, &p_.b_dec}) t->zero_grad();
  SaeOutput<float> out =
      sae_forward(p_, x, config_.activation, static_cast<float>(config_.l1_coefficient), config_.k);
  out.loss.backward();
  optimizer_.step(sae_lr(config_, step_));
  normalize_decoder(p_);
  const int64_t N = x.size(0), M = p_.d_sae();
  int64_t active = 0;
  for (int64_t r = 0; r < N; ++r) {
    const float* f = out.f.data() + r * M;
    for (int64_t j = 0; j < M; ++j)
      if (f[j] > 0) {
        ++fired_[j];
        ++active;
      }
  }
  ++step_;
  int resampled = 0;
  if (config_.resample_every > 0 && step_ % config_.resample_every == 0 && step_ < config_.steps) {
    resampled = resample_dead(x, out.x_hat);
    std::fill(fired_.begin(), fired_.end(), 0);
  }
  return {out.loss.item(), out.mse.item(), static_cast<float>(active) / N, resampled};
}

int SaeTrainer::resample_dead(const ag::Tensor<float>& x, const ag::Tensor<float>& x_hat) {
  const int64_t N = x.size(0), D = p_.d_in(), M = p_.d_sae();
  std::vector<int64_t> dead;
  for (int64_t j = 0; j < M; ++j)
    if (fired_[j] == 0) dead.push_back(j);
  if (dead.empty()) return 0;
  // Each token's squared error, the cumulative weights to draw from.
  std::vector<double> cum(N);
  double total = 0;
  for (int64_t r = 0; r < N; ++r) {
    double e = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double v = double(x.data()[r * D + d]) - x_hat.data()[r * D + d];
      e += v * v;
    }
    total += e;
    cum[r] = total;
  }
  if (!(total > 0)) return 0;
  double alive_norm = 0;
  int64_t alive = 0;
  auto W_enc = ag::MatMap<float>(p_.W_enc.data(), D, M);
  for (int64_t j = 0; j < M; ++j)
    if (fired_[j] > 0) {
      alive_norm += W_enc.col(j).norm();
      ++alive;
    }
  const float enc_norm = static_cast<float>(0.2 * (alive > 0 ? alive_norm / alive : 1.0));
  ag::Rng rng(config_.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(step_)));
  auto& m = optimizer_.first_moments();
  auto& v = optimizer_.second_moments();
  for (int64_t j : dead) {
    const double u = rng.uniform() * total;
    const int64_t r = std::min<int64_t>(std::lower_bound(cum.begin(), cum.end(), u) - cum.begin(), N - 1);
    double n2 = 0;
    for (int64_t d = 0; d < D; ++d) {
      const double e = double(x.data()[r * D + d]) - x_hat.data()[r * D + d];
      n2 += e * e;
    }
    const float inv = n2 > 0 ? static_cast<float>(1 / std::sqrt(n2)) : 0.f;
    for (int64_t d = 0; d < D; ++d) {
      const float dir = (x.data()[r * D + d] - x_hat.data()[r * D + d]) * inv;
      p_.W_dec.data()[j * D + d] = dir;
      W_enc(d, j) = dir * enc_norm;
      m[0][d * M + j] = v[0][d * M + j] = 0;
      m[2][j * D + d] = v[2][j * D + d] = 0;
    }
    p_.b_enc.data()[j] = 0;
    m[1][j] = v[1][j] = 0;
  }
  return static_cast<int>(dead.size());
}

void SaeTrainer::save_checkpoint(const std::string& path,
                                 const std::map<std::string, std::string>& metadata) const {
  std::vector<train::NamedArray> arrays;
  const char* names[] = {"W_enc", "b_enc", "W_dec", "b_dec"};
  const ag::Tensor<float>* ts[] = {&p_.W_enc, &p_.b_enc, &p_.W_dec, &p_.b_dec};
  auto& self = const_cast<SaeTrainer&>(*this);
  for (int i = 0; i < 4; ++i) {
    arrays.push_back({names[i], ts[i]->shape(), ts[i]->to_vector()});
    arrays.push_back({std::string("adam_m.") + names[i], ts[i]->shape(), self.optimizer_.first_moments()[i]});
    arrays.push_back(
        {std::string("adam_v.") + names[i], ts[i]->shape(), self.optimizer_.second_moments()[i]});
  }
  std::vector<float> fired(fired_.begin(), fired_.end());  // counts up to 2^24 are exact
  arrays.push_back({"fired", {p_.d_sae()}, fired});
  std::map<std::string, std::string> meta = metadata;
  meta["step"] = train::u64_to_metadata(static_cast<uint64_t>(step_));
  meta["adam_steps"] = train::u64_to_metadata(static_cast<uint64_t>(optimizer_.steps_taken()));
  train::write_safetensors(path, arrays, meta);
}

void SaeTrainer::load_checkpoint(const std::string& path) {
  const train::SafetensorsFile file = train::read_safetensors(path);
  const int64_t D = p_.d_in(), M = p_.d_sae();
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  const char* names[] = {"W_enc", "b_enc", "W_dec", "b_dec"};
  ag::Tensor<float>* ts[] = {&p_.W_enc, &p_.b_enc, &p_.W_dec, &p_.b_dec};
  for (int i = 0; i < 4; ++i)
    for (const std::string prefix : {"", "adam_m.", "adam_v."})
      expected.push_back({prefix + names[i], ts[i]->shape()});
  expected.push_back({"fired", {M}});
  train::expect_tensors(file, expected, path);
  (void)D;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float>& w = file.find(names[i])->data;
    std::copy(w.begin(), w.end(), ts[i]->data());
    optimizer_.first_moments()[i] = file.find(std::string("adam_m.") + names[i])->data;
    optimizer_.second_moments()[i] = file.find(std::string("adam_v.") + names[i])->data;
  }
  const std::vector<float>& fired = file.find("fired")->data;
  for (int64_t j = 0; j < M; ++j) fired_[j] = static_cast<int64_t>(fired[j]);
  step_ = static_cast<int64_t>(train::metadata_u64(file, "step", path));
  optimizer_.set_steps_taken(static_cast<int64_t>(train::metadata_u64(file, "adam_steps", path)));
}

void save_sae(const std::string& path, const SaeParams<float>& p,
              const std::map<std::string, std::string>& metadata) {
  train::write_safetensors(path,
                           {{"W_enc", p.W_enc.shape(), p.W_enc.to_vector()},
                            {"b_enc", p.b_enc.shape(), p.b_enc.to_vector()},
                            {"W_dec", p.W_dec.shape(), p.W_dec.to_vector()},
                            {"b_dec", p.b_dec.shape(), p.b_dec.to_vector()}},
                           metadata);
}

SaeParams<float> load_sae(const std::string& path) {
  const train::SafetensorsFile file = train::read_safetensors(path);
  const train::NamedArray* W_enc = file.find("W_enc");
  if (!W_enc) throw std::runtime_error(path + ": missing tensor W_enc");
  if (W_enc->shape.size() != 2 || W_enc->shape[0] < 1 || W_enc->shape[1] < 1)
    throw std::runtime_error(path + ": W_enc: expected a 2-d shape (d_in, d_sae) with both at least 1");
  const int64_t D = W_enc->shape[0], M = W_enc->shape[1];
  train::expect_tensors(file, {{"W_enc", {D, M}}, {"b_enc", {M}}, {"W_dec", {M, D}}, {"b_dec", {D}}}, path);
  SaeParams<float> p;
  auto take = [&](const char* name) {
    const train::NamedArray* a = file.find(name);
    for (float v : a->data)
      if (!std::isfinite(v)) throw std::runtime_error(path + ": " + name + ": a value is not finite");
    return ag::Tensor<float>::from(a->shape, a->data);
  };
  p.W_enc = take("W_enc");
  p.b_enc = take("b_enc");
  p.W_dec = take("W_dec");
  p.b_dec = take("b_dec");
  return p;
}

template ag::Tensor<float> relu_decode(const ag::Tensor<float>&, const ag::Tensor<float>&);
template ag::Tensor<double> relu_decode(const ag::Tensor<double>&, const ag::Tensor<double>&);
template ag::Tensor<float> sparse_grad_linear(const ag::Tensor<float>&, const ag::Tensor<float>&,
                                              const ag::Tensor<float>&);
template ag::Tensor<double> sparse_grad_linear(const ag::Tensor<double>&, const ag::Tensor<double>&,
                                               const ag::Tensor<double>&);
template SaeOutput<float> sae_forward(const SaeParams<float>&, const ag::Tensor<float>&, SaeActivation, float,
                                      int);
template SaeOutput<double> sae_forward(const SaeParams<double>&, const ag::Tensor<double>&, SaeActivation,
                                       double, int);

}  // namespace study
