// Sparse ops: products whose operands are mostly zero behind a ReLU or TopK, computed over the nonzero
// entries only (sparse autoencoders train through them, dictionary/sae.h). Forward and backward side by side.
#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "autograd/gemm.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

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
  parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
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
  parallel_for(N, N * M, [&](int64_t n0, int64_t n1) {
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
  parallel_for((C + B - 1) / B, R * C, [&](int64_t c0, int64_t c1) {
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
Tensor<T> topk_relu(const Tensor<T>& pre, int k) {
  if (pre.dim() != 2 || k < 1)
    throw std::invalid_argument("topk_relu: expected pre (N, M) and k >= 1, got " + shape_str(pre.shape()) +
                                " and k " + std::to_string(k));
  const int64_t N = pre.size(0), M = pre.size(1);
  const int64_t kk = std::min<int64_t>(k, M);
  Tensor<T> f = Tensor<T>::zeros({N, M});
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
  parallel_for(N, N * M * 2, [&](int64_t r0, int64_t r1) {
    std::vector<std::pair<T, int32_t>> buf;
    buf.reserve(static_cast<size_t>(4 * kk));
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = pre.data() + r * M;
      const ConstVecMap<T> v(row, M);
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
  if (needs_grad<T>({&pre}))
    attach(f, "topk_relu", {pre.node_ptr()}, [N, M, kk, kept, kept_n](Node<T>& node) {
      // d pre = d f at the kept entries, 0 elsewhere.
      const T* df = node.grad.data();
      const detail::Grad<T> dpre(*node.inputs[0]);
      if (!dpre) return;
      parallel_for(N, N * M, [&](int64_t r0, int64_t r1) {
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
Tensor<T> relu_decode(const Tensor<T>& pre, const Tensor<T>& W) {
  if (pre.dim() != 2 || W.dim() != 2 || pre.size(1) != W.size(0))
    throw std::invalid_argument("relu_decode: expected pre (N, M) and W (M, D), got " +
                                shape_str(pre.shape()) + " and " + shape_str(W.shape()));
  const int64_t N = pre.size(0), M = pre.size(1), D = W.size(1);
  Tensor<T> y = Tensor<T>::zeros({N, D});
  const std::shared_ptr<Pattern<T>> act = find_pattern(pre.data(), N, M, [](T v) { return v > T(0); });
  {
    // y_n = sum over active j of pre_nj W_j
    ConstMatMap<T> Wm(W.data(), M, D);
    MatMap<T> Y(y.data(), N, D);
    parallel_for(N, act->nnz() * D + N, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t i = act->start[n]; i < act->start[n + 1]; ++i)
          Y.row(n) += act->val[i] * Wm.row(act->col[i]);
    });
  }
  if (needs_grad<T>({&pre, &W}))
    attach(y, "relu_decode", {pre.node_ptr(), W.node_ptr()}, [N, M, D, act](Node<T>& node) {
      ConstMatMap<T> Wm(node.inputs[1]->value.data(), M, D);
      ConstMatMap<T> dy(node.grad.data(), N, D);
      const detail::Grad<T> dpre(*node.inputs[0]);
      if (dpre) {
        // dpre_nj = [pre_nj > 0] dy_n . W_j
        parallel_for(N, act->nnz() * D + N * M, [&](int64_t n0, int64_t n1) {
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
      const detail::Grad<T> dW(*node.inputs[1]);
      if (dW) {
        // dW_j = sum over the tokens n where j is active of pre_nj dy_n, in token order; each row of dW is
        // one thread's.
        MatMap<T> dWm(dW.data(), M, D);
        parallel_for(M, act->nnz() * D + M, [&](int64_t j0, int64_t j1) {
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
Tensor<T> sparse_grad_linear(const Tensor<T>& x, const Tensor<T>& c, const Tensor<T>& W, const Tensor<T>& b) {
  if (x.dim() != 2 || c.dim() != 1 || W.dim() != 2 || b.dim() != 1 || x.size(1) != W.size(0) ||
      c.size(0) != W.size(0) || b.size(0) != W.size(1))
    throw std::invalid_argument("sparse_grad_linear: expected x (N, D), c (D), W (D, M), b (M), got " +
                                shape_str(x.shape()) + ", " + shape_str(c.shape()) + ", " +
                                shape_str(W.shape()) + " and " + shape_str(b.shape()));
  const int64_t N = x.size(0), D = x.size(1), M = W.size(1);
  auto xc = std::make_shared<Mat<T>>(ConstMatMap<T>(x.data(), N, D).rowwise() -
                                     ConstMatMap<T>(c.data(), 1, D).row(0));
  Tensor<T> y = Tensor<T>::empty({N, M});
  CStart<T> start;
  start.bias = b.data();
  gemm<T>(N, M, D, row_major(xc->data(), D), row_major(W.data(), M), y.data(), M, start);
  if (needs_grad<T>({&x, &c, &W, &b}))
    attach(y, "sparse_grad_linear", {x.node_ptr(), c.node_ptr(), W.node_ptr(), b.node_ptr()},
           [N, D, M, xc](Node<T>& node) {
             const T* dy = node.grad.data();
             const T* xv = xc->data();
             const T* Wv = node.inputs[2]->value.data();
             const std::shared_ptr<Pattern<T>> nz = find_pattern(dy, N, M, [](T v) { return v != T(0); });
             const bool sparse = nz->nnz() * 10 <= N * M;
             const detail::Grad<T> dx(*node.inputs[0]);
             if (dx) {
               if (!sparse) {
                 gemm<T>(N, D, M, row_major(dy, M), row_major(Wv, M).transposed(), dx.data(), D, dx.adds());
               } else {
                 // dx_n = sum over nonzero dy_nj of dy_nj W[:, j], with W transposed once so the rows are
                 // contiguous.
                 Mat<T> Wt(M, D);
                 transpose_into(Wv, D, M, Wt.data(), false);
                 MatMap<T> dX(dx.data(), N, D);
                 parallel_for(N, nz->nnz() * D + N, [&](int64_t n0, int64_t n1) {
                   for (int64_t n = n0; n < n1; ++n) {
                     if (!dx.adds()) dX.row(n).setZero();
                     for (int64_t i = nz->start[n]; i < nz->start[n + 1]; ++i)
                       dX.row(n) += nz->val[i] * Wt.row(nz->col[i]);
                   }
                 });
               }
             }
             // db = the column sums of dy, first: d c = -W db needs it.
             Vec<T> db(M);
             if (!sparse) {
               db = ConstMatMap<T>(dy, N, M).colwise().sum().transpose().array();
             } else {
               // db_j = the sum of column j's nonzero entries, in token order.
               for (int64_t j = 0; j < M; ++j) {
                 T acc = 0;
                 for (int64_t i = nz->cstart[j]; i < nz->cstart[j + 1]; ++i) acc += nz->cval[i];
                 db[j] = acc;
               }
             }
             const detail::Grad<T> dc(*node.inputs[1]);
             if (dc) dc.put(0, D, -(ConstMatMap<T>(Wv, D, M) * db.matrix()).array());
             const detail::Grad<T> dW(*node.inputs[2]);
             if (dW) {
               if (!sparse) {
                 gemm<T>(D, M, N, row_major(xv, D).transposed(), row_major(dy, M), dW.data(), M, dW.adds());
               } else {
                 // dW[:, j] = sum over nonzero dy_nj of dy_nj x_n, by column into (M, D), then
                 // transposed.
                 Mat<T> dWt(M, D);
                 ConstMatMap<T> X(xv, N, D);
                 parallel_for(M, nz->nnz() * D + M, [&](int64_t j0, int64_t j1) {
                   for (int64_t j = j0; j < j1; ++j) {
                     dWt.row(j).setZero();
                     for (int64_t i = nz->cstart[j]; i < nz->cstart[j + 1]; ++i)
                       dWt.row(j) += nz->cval[i] * X.row(nz->row[i]);
                   }
                 });
                 transpose_into(dWt.data(), M, D, dW.data(), dW.adds());
               }
             }
             const detail::Grad<T> dbias(*node.inputs[3]);
             if (dbias) dbias.put(0, M, db);
           });
  return y;
}

template Tensor<float> topk_relu(const Tensor<float>&, int);
template Tensor<double> topk_relu(const Tensor<double>&, int);
template Tensor<float> relu_decode(const Tensor<float>&, const Tensor<float>&);
template Tensor<double> relu_decode(const Tensor<double>&, const Tensor<double>&);
template Tensor<float> sparse_grad_linear(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                          const Tensor<float>&);
template Tensor<double> sparse_grad_linear(const Tensor<double>&, const Tensor<double>&,
                                           const Tensor<double>&, const Tensor<double>&);

}  // namespace ag
