#include "study/sae.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "autograd/gemm.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "io/field_table.h"
#include "io/json_error.h"
#include "io/json_read.h"
#include "train/safetensors.h"

namespace study {

namespace {

using json = nlohmann::json;

// The SAE config's table (io/field_table.h): type, range and meaning of every field, read with the same
// one-line messages as a run's config.
const io::Table<SaeConfig>& sae_config_fields() {
  static const io::Table<SaeConfig> fields = {
      {"d_sae", &SaeConfig::d_sae, "features; 0: `expansion` x d_in", io::at_least(0).up_to(1 << 20)},
      {"expansion", &SaeConfig::expansion, "d_sae / d_in when d_sae is 0", io::at_least(1).up_to(256)},
      {"activation",
       io::named(&SaeConfig::activation, {{SaeActivation::relu, "relu"}, {SaeActivation::topk, "topk"}}),
       "the encoder's nonlinearity: relu with the L1 penalty, or topk (k active features)"},
      {"l1_coefficient", &SaeConfig::l1_coefficient, "the L1 penalty's weight (ReLU)",
       io::at_least(0).up_to(1e6)},
      {"k", &SaeConfig::k, "active features per token (TopK)", io::at_least(1).up_to(1 << 16)},
      {"steps", &SaeConfig::steps, "training steps", io::at_least(1).up_to(double(int64_t(1) << 40))},
      {"batch_size", &SaeConfig::batch_size, "tokens per step", io::at_least(1).up_to(1 << 20)},
      {"lr", &SaeConfig::lr, "AdamW's learning rate after warmup", io::above(0).up_to(10)},
      {"warmup", &SaeConfig::warmup, "linear warmup steps", io::at_least(0).up_to(1 << 30)},
      {"weight_decay", &SaeConfig::weight_decay, "AdamW's decoupled weight decay on W_enc and W_dec",
       io::at_least(0).up_to(10)},
      {"resample_every", &SaeConfig::resample_every, "dead-feature resampling period (steps); 0: never",
       io::at_least(0).up_to(double(int64_t(1) << 40))},
      {"buffer_tokens", &SaeConfig::buffer_tokens, "activations shuffled at a time",
       io::at_least(1, "at least `batch_size`").up_to(double(int64_t(1) << 28))},
      {"skip_bos", &SaeConfig::skip_bos, "leave position 0 (BOS) out of training, evaluation and splicing"},
      {"eval_sequences", &SaeConfig::eval_sequences, "held-out sequences for eval.json and features.json",
       io::at_least(1).up_to(1 << 20)},
      {"top_examples", &SaeConfig::top_examples, "top-activating examples per feature (one per sequence)",
       io::at_least(1).up_to(100)},
      {"checkpoint_every", &SaeConfig::checkpoint_every, "steps between checkpoints (and at the end)",
       io::at_least(1).up_to(1 << 30)},
      {"seed", &SaeConfig::seed, "the SAE's initialisation, the activation stream, resampling"},
  };
  return fields;
}

// The learning rate at `step` (from 0): linear warmup, then constant.
double sae_lr(const SaeConfig& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) return c.lr * static_cast<double>(step + 1) / c.warmup;
  return c.lr;
}

}  // namespace

SaeConfig sae_config_from_json(const json& j, const std::string& source) {
  SaeConfig c = io::read_table(j, sae_config_fields(), source);
  if (c.buffer_tokens < c.batch_size)
    throw io::field_error(source,
                          {"/buffer_tokens", "expected at least batch_size (" + std::to_string(c.batch_size) +
                                                 "), got " + std::to_string(c.buffer_tokens)});
  return c;
}

SaeConfig load_sae_config(const std::string& path) {
  return sae_config_from_json(io::load_json_file(path, io::kMaxJsonFileBytes, "an SAE config file"), path);
}

json sae_config_to_json(const SaeConfig& c) {
  return io::fields_to_json(sae_config_fields(), c);
}

std::vector<io::FieldInfo> sae_config_field_infos() {
  std::vector<io::FieldInfo> infos;
  io::add_field_infos(infos, "", sae_config_fields());
  return infos;
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

namespace {

// The entries of an (N, M) row-major array that an op treats as nonzero, with their values: by row (row
// n's are col[i], val[i] for i in [start[n], start[n + 1]), columns ascending) and by column (column j's
// are row[i], cval[i] for i in [cstart[j], cstart[j + 1]), rows ascending). Found with two parallel passes
// over the array (a count that vectorises, then a fill) and one over the entries, so the sparse products
// below read short contiguous lists and never the dense array again.
template <typename T>
struct Pattern {
  std::vector<int64_t> start, cstart;
  std::vector<int32_t> col, row;
  std::vector<T> val, cval;
  int64_t nnz() const { return start.back(); }
};

template <typename T, typename Keep>
std::shared_ptr<Pattern<T>> find_pattern(const T* a, int64_t N, int64_t M, Keep keep) {
  auto p = std::make_shared<Pattern<T>>();
  p->start.assign(static_cast<size_t>(N + 1), 0);
  ag::parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* r = a + n * M;
      int64_t c = 0;
      for (int64_t j = 0; j < M; ++j) c += keep(r[j]) ? 1 : 0;
      p->start[n + 1] = c;
    }
  });
  for (int64_t n = 0; n < N; ++n) p->start[n + 1] += p->start[n];
  p->col.resize(static_cast<size_t>(p->nnz()));
  p->val.resize(static_cast<size_t>(p->nnz()));
  ag::parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* r = a + n * M;
      int64_t i = p->start[n];
      // By chunks of 16, skipping a chunk with no entry kept (a test that vectorises): on a sparse row most
      // chunks are empty.
      for (int64_t j0 = 0; j0 < M; j0 += 16) {
        const int64_t j1 = std::min(M, j0 + 16);
        bool any = false;
        for (int64_t j = j0; j < j1; ++j) any |= keep(r[j]);
        if (!any) continue;
        for (int64_t j = j0; j < j1; ++j)
          if (keep(r[j])) {
            p->col[i] = static_cast<int32_t>(j);
            p->val[i++] = r[j];
          }
      }
    }
  });
  p->cstart.assign(static_cast<size_t>(M + 1), 0);
  for (int32_t j : p->col) ++p->cstart[j + 1];
  for (int64_t j = 0; j < M; ++j) p->cstart[j + 1] += p->cstart[j];
  std::vector<int64_t> fill(p->cstart.begin(), p->cstart.end() - 1);
  p->row.resize(p->col.size());
  p->cval.resize(p->col.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = p->start[n]; i < p->start[n + 1]; ++i) {
      const int64_t at = fill[p->col[i]]++;
      p->row[at] = static_cast<int32_t>(n);
      p->cval[at] = p->val[i];
    }
  return p;
}

// out (C, R) = a (R, C) transposed, row-major both, by 32 x 32 tiles so reads and writes stay in cache;
// added to out when `add`.
template <typename T>
void transpose_into(const T* a, int64_t R, int64_t C, T* out, bool add) {
  constexpr int64_t B = 32;
  ag::parallel_for((C + B - 1) / B, R * C, [&](int64_t c0, int64_t c1) {
    for (int64_t cb = c0 * B, ce = std::min(C, c1 * B); cb < ce; cb += B) {
      const int64_t cn = std::min(B, C - cb);
      for (int64_t rb = 0; rb < R; rb += B) {
        const int64_t rn = std::min(B, R - rb);
        for (int64_t c = cb; c < cb + cn; ++c) {
          T* o = out + c * R + rb;
          const T* in = a + rb * C + c;
          if (add)
            for (int64_t r = 0; r < rn; ++r) o[r] += in[r * C];
          else
            for (int64_t r = 0; r < rn; ++r) o[r] = in[r * C];
        }
      }
    }
  });
}

}  // namespace

template <typename T>
ag::Tensor<T> topk_relu(const ag::Tensor<T>& pre, int k) {
  if (pre.dim() != 2 || k < 1)
    throw std::invalid_argument("topk_relu: expected pre (N, M) and k >= 1, got " +
                                ag::shape_str(pre.shape()) + " and k " + std::to_string(k));
  const int64_t N = pre.size(0), M = pre.size(1);
  const int64_t kk = std::min<int64_t>(k, M);
  ag::Tensor<T> f = ag::Tensor<T>::zeros({N, M});
  // Each row's kept entries (positive and among the k largest), kk slots a row, count in kept_n.
  auto kept = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(N * kk));
  auto kept_n = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(N));
  // The k largest of a row: split its first k x floor(M / k) entries into k blocks; the k block maxima are
  // k distinct entries, so the k-th largest is at least the smallest of them (`bar`). Only the entries at
  // or above the bar (a few times k on a typical row) are gathered, and one selection keeps the best k of
  // them (by value, ties to the lower index).
  const auto better = [](const std::pair<T, int32_t>& a, const std::pair<T, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const int64_t block = M / kk;
  ag::parallel_for(N, N * M * 2, [&](int64_t r0, int64_t r1) {
    std::vector<std::pair<T, int32_t>> buf;
    buf.reserve(static_cast<size_t>(4 * kk));
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = pre.data() + r * M;
      const ag::ConstVecMap<T> v(row, M);
      T bar = std::numeric_limits<T>::infinity();
      for (int64_t b = 0; b < kk; ++b) bar = std::min(bar, v.segment(b * block, block).maxCoeff());
      buf.clear();
      for (int64_t j0 = 0; j0 < M; j0 += 16) {  // by chunks of 16, most of them entirely below the bar
        const int64_t n = std::min<int64_t>(16, M - j0);
        if (v.segment(j0, n).maxCoeff() < bar) continue;
        for (int64_t j = j0; j < j0 + n; ++j)
          if (row[j] >= bar) buf.emplace_back(row[j], static_cast<int32_t>(j));
      }
      if (buf.size() > static_cast<size_t>(kk)) {
        std::nth_element(buf.begin(), buf.begin() + (kk - 1), buf.end(), better);
        buf.resize(static_cast<size_t>(kk));
      }
      std::sort(buf.begin(), buf.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      T* out = f.data() + r * M;
      int32_t* ks = kept->data() + r * kk;
      int32_t c = 0;
      for (const auto& [v, j] : buf)
        if (v > T(0)) {
          out[j] = v;
          ks[c++] = j;
        }
      (*kept_n)[static_cast<size_t>(r)] = c;
    }
  });
  if (ag::needs_grad<T>({&pre}))
    ag::attach(f, "topk_relu", {pre.node_ptr()}, [N, M, kk, kept, kept_n](ag::Node<T>& node) {
      // d pre = d f at the kept entries, 0 elsewhere.
      const T* df = node.grad.data();
      const ag::detail::Grad<T> dpre(*node.inputs[0]);
      if (!dpre) return;
      ag::parallel_for(N, N * M, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* out = dpre.data() + r * M;
          if (!dpre.adds()) std::fill(out, out + M, T(0));
          const int32_t* ks = kept->data() + r * kk;
          for (int32_t i = 0; i < (*kept_n)[static_cast<size_t>(r)]; ++i) out[ks[i]] += df[r * M + ks[i]];
        }
      });
    });
  return f;
}

template <typename T>
ag::Tensor<T> relu_decode(const ag::Tensor<T>& pre, const ag::Tensor<T>& W) {
  if (pre.dim() != 2 || W.dim() != 2 || pre.size(1) != W.size(0))
    throw std::invalid_argument("relu_decode: expected pre (N, M) and W (M, D), got " +
                                ag::shape_str(pre.shape()) + " and " + ag::shape_str(W.shape()));
  const int64_t N = pre.size(0), M = pre.size(1), D = W.size(1);
  ag::Tensor<T> y = ag::Tensor<T>::zeros({N, D});
  const std::shared_ptr<Pattern<T>> act = find_pattern(pre.data(), N, M, [](T v) { return v > T(0); });
  {
    // y_n = sum over active j of pre_nj W_j
    ag::ConstMatMap<T> Wm(W.data(), M, D);
    ag::MatMap<T> Y(y.data(), N, D);
    ag::parallel_for(N, act->nnz() * D + N, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t i = act->start[n]; i < act->start[n + 1]; ++i)
          Y.row(n) += act->val[i] * Wm.row(act->col[i]);
    });
  }
  if (ag::needs_grad<T>({&pre, &W}))
    ag::attach(y, "relu_decode", {pre.node_ptr(), W.node_ptr()}, [N, M, D, act](ag::Node<T>& node) {
      ag::ConstMatMap<T> Wm(node.inputs[1]->value.data(), M, D);
      ag::ConstMatMap<T> dy(node.grad.data(), N, D);
      const ag::detail::Grad<T> dpre(*node.inputs[0]);
      if (dpre) {
        // dpre_nj = [pre_nj > 0] dy_n . W_j
        ag::parallel_for(N, act->nnz() * D + N * M, [&](int64_t n0, int64_t n1) {
          for (int64_t n = n0; n < n1; ++n) {
            T* row = dpre.data() + n * M;
            if (!dpre.adds()) std::fill(row, row + M, T(0));
            for (int64_t i = act->start[n]; i < act->start[n + 1]; ++i) {
              const int32_t j = act->col[i];
              row[j] += dy.row(n).dot(Wm.row(j));
            }
          }
        });
      }
      const ag::detail::Grad<T> dW(*node.inputs[1]);
      if (dW) {
        // dW_j = sum over the tokens n where j is active of pre_nj dy_n, in token order; each row of dW is
        // one thread's.
        ag::MatMap<T> dWm(dW.data(), M, D);
        ag::parallel_for(M, act->nnz() * D + M, [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) {
            if (!dW.adds()) dWm.row(j).setZero();
            for (int64_t i = act->cstart[j]; i < act->cstart[j + 1]; ++i)
              dWm.row(j) += act->cval[i] * dy.row(act->row[i]);
          }
        });
      }
    });
  return y;
}

template <typename T>
ag::Tensor<T> sparse_grad_linear(const ag::Tensor<T>& x, const ag::Tensor<T>& c, const ag::Tensor<T>& W,
                                 const ag::Tensor<T>& b) {
  if (x.dim() != 2 || c.dim() != 1 || W.dim() != 2 || b.dim() != 1 || x.size(1) != W.size(0) ||
      c.size(0) != W.size(0) || b.size(0) != W.size(1))
    throw std::invalid_argument("sparse_grad_linear: expected x (N, D), c (D), W (D, M), b (M), got " +
                                ag::shape_str(x.shape()) + ", " + ag::shape_str(c.shape()) + ", " +
                                ag::shape_str(W.shape()) + " and " + ag::shape_str(b.shape()));
  const int64_t N = x.size(0), D = x.size(1), M = W.size(1);
  auto xc = std::make_shared<ag::Mat<T>>(ag::ConstMatMap<T>(x.data(), N, D).rowwise() -
                                         ag::ConstMatMap<T>(c.data(), 1, D).row(0));
  ag::Tensor<T> y = ag::Tensor<T>::empty({N, M});
  ag::CStart<T> start;
  start.bias = b.data();
  ag::gemm<T>(N, M, D, ag::row_major(xc->data(), D), ag::row_major(W.data(), M), y.data(), M, start);
  if (ag::needs_grad<T>({&x, &c, &W, &b}))
    ag::attach(y, "sparse_grad_linear", {x.node_ptr(), c.node_ptr(), W.node_ptr(), b.node_ptr()},
               [N, D, M, xc](ag::Node<T>& node) {
                 const T* dy = node.grad.data();
                 const T* xv = xc->data();
                 const T* Wv = node.inputs[2]->value.data();
                 const std::shared_ptr<Pattern<T>> nz = find_pattern(dy, N, M, [](T v) { return v != T(0); });
                 const bool sparse = nz->nnz() * 10 <= N * M;
                 const ag::detail::Grad<T> dx(*node.inputs[0]);
                 if (dx) {
                   if (!sparse) {
                     ag::gemm<T>(N, D, M, ag::row_major(dy, M), ag::row_major(Wv, M).transposed(), dx.data(),
                                 D, dx.adds());
                   } else {
                     // dx_n = sum over nonzero dy_nj of dy_nj W[:, j], with W transposed once so the rows are
                     // contiguous.
                     ag::Mat<T> Wt(M, D);
                     transpose_into(Wv, D, M, Wt.data(), false);
                     ag::MatMap<T> dX(dx.data(), N, D);
                     ag::parallel_for(N, nz->nnz() * D + N, [&](int64_t n0, int64_t n1) {
                       for (int64_t n = n0; n < n1; ++n) {
                         if (!dx.adds()) dX.row(n).setZero();
                         for (int64_t i = nz->start[n]; i < nz->start[n + 1]; ++i)
                           dX.row(n) += nz->val[i] * Wt.row(nz->col[i]);
                       }
                     });
                   }
                 }
                 // db = the column sums of dy, first: d c = -W db needs it.
                 ag::Vec<T> db(M);
                 if (!sparse) {
                   db = ag::ConstMatMap<T>(dy, N, M).colwise().sum().transpose().array();
                 } else {
                   // db_j = the sum of column j's nonzero entries, in token order.
                   for (int64_t j = 0; j < M; ++j) {
                     T acc = 0;
                     for (int64_t i = nz->cstart[j]; i < nz->cstart[j + 1]; ++i) acc += nz->cval[i];
                     db[j] = acc;
                   }
                 }
                 const ag::detail::Grad<T> dc(*node.inputs[1]);
                 if (dc) dc.put(0, D, -(ag::ConstMatMap<T>(Wv, D, M) * db.matrix()).array());
                 const ag::detail::Grad<T> dW(*node.inputs[2]);
                 if (dW) {
                   if (!sparse) {
                     ag::gemm<T>(D, M, N, ag::row_major(xv, D).transposed(), ag::row_major(dy, M), dW.data(),
                                 M, dW.adds());
                   } else {
                     // dW[:, j] = sum over nonzero dy_nj of dy_nj x_n, by column into (M, D), then
                     // transposed.
                     ag::Mat<T> dWt(M, D);
                     ag::ConstMatMap<T> X(xv, N, D);
                     ag::parallel_for(M, nz->nnz() * D + M, [&](int64_t j0, int64_t j1) {
                       for (int64_t j = j0; j < j1; ++j) {
                         dWt.row(j).setZero();
                         for (int64_t i = nz->cstart[j]; i < nz->cstart[j + 1]; ++i)
                           dWt.row(j) += nz->cval[i] * X.row(nz->row[i]);
                       }
                     });
                     transpose_into(dWt.data(), M, D, dW.data(), dW.adds());
                   }
                 }
                 const ag::detail::Grad<T> dbias(*node.inputs[3]);
                 if (dbias) dbias.put(0, M, db);
               });
  return y;
}

template <typename T>
SaeOutput<T> sae_forward(const SaeParams<T>& p, const ag::Tensor<T>& x, SaeActivation act, T l1, int k) {
  if (x.dim() != 2 || x.size(1) != p.d_in())
    throw std::invalid_argument("sae_forward: x must be (N, " + std::to_string(p.d_in()) + ")");
  const int64_t N = x.size(0);
  SaeOutput<T> out;
  const ag::Tensor<T> pre = sparse_grad_linear(x, p.b_dec, p.W_enc, p.b_enc);  // (N, d_sae)
  out.f = act == SaeActivation::topk ? topk_relu(pre, k) : ag::relu(pre);
  out.x_hat = relu_decode(out.f, p.W_dec) + p.b_dec;  // (N, d_in); relu(f) = f
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
    for (int64_t j = 0; j < M; ++j) {  // no branch: the loop vectorises
      const int64_t on = f[j] > 0;
      fired_[j] += on;
      active += on;
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

template ag::Tensor<float> topk_relu(const ag::Tensor<float>&, int);
template ag::Tensor<double> topk_relu(const ag::Tensor<double>&, int);
template ag::Tensor<float> relu_decode(const ag::Tensor<float>&, const ag::Tensor<float>&);
template ag::Tensor<double> relu_decode(const ag::Tensor<double>&, const ag::Tensor<double>&);
template ag::Tensor<float> sparse_grad_linear(const ag::Tensor<float>&, const ag::Tensor<float>&,
                                              const ag::Tensor<float>&, const ag::Tensor<float>&);
template ag::Tensor<double> sparse_grad_linear(const ag::Tensor<double>&, const ag::Tensor<double>&,
                                               const ag::Tensor<double>&, const ag::Tensor<double>&);
template SaeOutput<float> sae_forward(const SaeParams<float>&, const ag::Tensor<float>&, SaeActivation, float,
                                      int);
template SaeOutput<double> sae_forward(const SaeParams<double>&, const ag::Tensor<double>&, SaeActivation,
                                       double, int);

}  // namespace study
