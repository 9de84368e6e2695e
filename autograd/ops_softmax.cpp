// The softmax family along the last dim (softmax, log-softmax, cross-entropy) and masked_fill, which puts
// -inf where attention must not look. Each has a fused backward: one pass per row, no intermediate tensors.
//
// Masked rows: a row whose entries are all -inf (a query that may attend to nothing) gives zeros and passes
// no gradient, rather than the NaN that exp(-inf - -inf) would produce.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "autograd/softmax_row.h"
#include "autograd/threads.h"

namespace ag {

namespace {

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

struct Rows {
  int64_t rows = 0, cols = 0;
};

// The tensor as rows x last-dim, or an exception naming the op.
template <typename T>
Rows rows_of(const Tensor<T>& a, const char* op) {
  if (!a.defined()) throw std::invalid_argument(std::string(op) + ": input tensor is undefined");
  if (a.dim() == 0) throw std::invalid_argument(std::string(op) + ": needs at least one dim, got shape []");
  Rows r;
  r.cols = a.shape().back();
  r.rows = r.cols == 0 ? 0 : a.numel() / r.cols;
  return r;
}

}  // namespace

template <typename T>
Tensor<T> softmax(const Tensor<T>& a) {
  const Rows shape = rows_of(a, "softmax");
  const int64_t rows = shape.rows, cols = shape.cols;
  Tensor<T> out = Tensor<T>::empty(a.shape());
  const T* x = a.data();
  T* y = out.data();
  parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
    softmax_rows(x + r0 * cols, y + r0 * cols, r1 - r0, cols, cols);
  });
  if (needs_grad<T>({&a}))
    attach(out, "softmax", {a.node_ptr()}, [rows, cols](Node<T>& n) {
      const detail::Grad<T> dx(*n.inputs[0]);
      if (!dx) return;
      const T* y = n.value.data();
      const T* dy = n.grad.data();
      // dx = y * (dy - <dy, y>); a masked row has y = 0, so it gets zero gradient without a special case.
      parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          ConstVecMap<T> yr(y + r * cols, cols), dyr(dy + r * cols, cols);
          const T dot = (yr * dyr).sum();
          dx.put(r * cols, cols, yr * (dyr - dot));
        }
      });
    });
  return out;
}

template <typename T>
Tensor<T> log_softmax(const Tensor<T>& a) {
  const Rows shape = rows_of(a, "log_softmax");
  const int64_t rows = shape.rows, cols = shape.cols;
  Tensor<T> out = Tensor<T>::empty(a.shape());
  // Backward must tell a masked row (output zeros) from a one-column row (also zeros, but live).
  std::vector<char> masked(static_cast<size_t>(rows), 0);
  const T* x = a.data();
  T* y = out.data();
  parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      ConstVecMap<T> xr(x + r * cols, cols);
      VecMap<T> yr(y + r * cols, cols);
      const T m = xr.maxCoeff();
      if (m == kNegInf<T>) {
        yr.setZero();
        masked[r] = 1;
        continue;
      }
      const T lse = m + std::log((xr - m).exp().sum());
      yr = xr - lse;
    }
  });
  if (needs_grad<T>({&a}))
    attach(out, "log_softmax", {a.node_ptr()}, [rows, cols, masked = std::move(masked)](Node<T>& n) {
      const detail::Grad<T> dx(*n.inputs[0]);
      if (!dx) return;
      const T* y = n.value.data();
      const T* dy = n.grad.data();
      // dx = dy - softmax * sum(dy), with softmax = exp(y).
      parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          if (masked[r]) {
            dx.zero(r * cols, cols);
            continue;
          }
          ConstVecMap<T> yr(y + r * cols, cols), dyr(dy + r * cols, cols);
          dx.put(r * cols, cols, dyr - yr.exp() * dyr.sum());
        }
      });
    });
  return out;
}

template <typename T>
Tensor<T> masked_fill(const Tensor<T>& a, const Tensor<T>& mask, T value) {
  if (!a.defined() || !mask.defined()) throw std::invalid_argument("masked_fill: input tensor is undefined");
  const Shape& as = a.shape();
  const Shape& ms = mask.shape();
  // The mask's stride along each of a's dims, 0 where the mask broadcasts (NumPy rules, aligned at the end).
  const size_t nd = as.size();
  bool fits = ms.size() <= nd;
  std::vector<int64_t> mstride(nd, 0);
  int64_t stride = 1;
  for (size_t i = 0; fits && i < ms.size(); ++i) {
    const size_t md = ms.size() - 1 - i, ad = nd - 1 - i;
    if (ms[md] == as[ad]) {
      mstride[ad] = as[ad] == 1 ? 0 : stride;
    } else if (ms[md] != 1) {
      fits = false;
    }
    stride *= ms[md];
  }
  if (!fits)
    throw std::invalid_argument("masked_fill: mask of shape " + shape_str(ms) +
                                " does not broadcast to the input's shape " + shape_str(as));

  const int64_t cols = nd == 0 ? 1 : as.back();
  const int64_t rows = cols == 0 ? 0 : a.numel() / cols;
  const int64_t col_stride = nd == 0 ? 0 : mstride.back();
  // Where row r of a starts in the mask: decompose r over a's leading dims.
  auto mask_row = [as, mstride, nd](int64_t r) {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(nd) - 2; d >= 0; --d) {
      off += (r % as[d]) * mstride[d];
      r /= as[d];
    }
    return off;
  };

  Tensor<T> out = Tensor<T>::empty(as);
  const T* x = a.data();
  const T* m = mask.data();
  T* y = out.data();
  for (int64_t r = 0; r < rows; ++r) {
    const T* mr = m + mask_row(r);
    ConstVecMap<T> xr(x + r * cols, cols);
    VecMap<T> yr(y + r * cols, cols);
    // The usual masks vary along the row (col_stride 1) or mask whole rows (0); both stay vectorised.
    if (col_stride != 0)
      yr = (ConstVecMap<T>(mr, cols) != T(0)).select(value, xr);
    else if (*mr != T(0))
      yr.setConstant(value);
    else
      yr = xr;
  }
  // The mask is not an input of the graph (it gets no gradient); the closure holds it to read it back.
  if (needs_grad<T>({&a}))
    attach(out, "masked_fill", {a.node_ptr()}, [mask, mask_row, rows, cols, col_stride](Node<T>& n) {
      const detail::Grad<T> dx(*n.inputs[0]);
      if (!dx) return;
      const T* m = mask.data();
      const T* dy = n.grad.data();
      for (int64_t r = 0; r < rows; ++r) {
        const T* mr = m + mask_row(r);
        ConstVecMap<T> dyr(dy + r * cols, cols);
        if (col_stride != 0)
          dx.put(r * cols, cols, (ConstVecMap<T>(mr, cols) != T(0)).select(T(0), dyr));
        else if (*mr != T(0))
          dx.zero(r * cols, cols);
        else
          dx.put(r * cols, cols, dyr);
      }
    });
  return out;
}

template <typename T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const std::vector<int32_t>& targets, int32_t ignore_index) {
  const Rows shape = rows_of(logits, "cross_entropy");
  const int64_t rows = shape.rows, cols = shape.cols;
  if (cols == 0)
    throw std::invalid_argument("cross_entropy: logits of shape " + shape_str(logits.shape()) +
                                " have no classes");
  if (static_cast<int64_t>(targets.size()) != rows)
    throw std::invalid_argument("cross_entropy: " + std::to_string(targets.size()) +
                                " targets for logits of shape " + shape_str(logits.shape()) + " (" +
                                std::to_string(rows) + " rows)");
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= cols)
      throw std::invalid_argument("cross_entropy: target " + std::to_string(t) + " at row " +
                                  std::to_string(r) + " is outside [0, " + std::to_string(cols) +
                                  ") for logits of shape " + shape_str(logits.shape()) + " (ignore_index " +
                                  std::to_string(ignore_index) + ")");
    ++count;
  }

  // Per-row log-sum-exp, kept for backward; per-row losses summed afterwards in a fixed order, so the
  // result does not depend on the thread count.
  std::vector<T> lse(static_cast<size_t>(rows), T(0));
  std::vector<double> loss(static_cast<size_t>(rows), 0.0);
  const T* x = logits.data();
  parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (targets[r] == ignore_index) continue;
      ConstVecMap<T> xr(x + r * cols, cols);
      const T m = xr.maxCoeff();
      // A row masked everywhere has lse = -inf and loss +inf: an honest answer for an impossible target.
      lse[r] = m == kNegInf<T> ? m : m + std::log((xr - m).exp().sum());
      loss[r] = static_cast<double>(lse[r]) - static_cast<double>(xr[targets[r]]);
    }
  });
  double total = 0;
  for (double l : loss) total += l;
  Tensor<T> out = Tensor<T>::scalar(count == 0 ? T(0) : static_cast<T>(total / static_cast<double>(count)));

  if (needs_grad<T>({&logits}))
    attach(out, "cross_entropy", {logits.node_ptr()},
           [targets, ignore_index, count, rows, cols, lse = std::move(lse)](Node<T>& n) {
             Node<T>& in = *n.inputs[0];
             if (count == 0) return;
             const detail::Grad<T> dlogits(in);
             if (!dlogits) return;
             const T scale = n.grad[0] / static_cast<T>(count);
             const T* x = in.value.data();
             // d loss / d logits = (softmax - onehot(target)) / count, softmax = exp(x - lse).
             parallel_for(rows, 4 * rows * cols, [&](int64_t r0, int64_t r1) {
               for (int64_t r = r0; r < r1; ++r) {
                 if (targets[r] == ignore_index || lse[r] == kNegInf<T>) {
                   dlogits.zero(r * cols, cols);
                   continue;
                 }
                 dlogits.put(r * cols, cols, scale * (ConstVecMap<T>(x + r * cols, cols) - lse[r]).exp());
                 dlogits.data()[r * cols + targets[r]] -= scale;
               }
             });
           });
  return out;
}

template Tensor<float> softmax<float>(const Tensor<float>&);
template Tensor<double> softmax<double>(const Tensor<double>&);
template Tensor<float> log_softmax<float>(const Tensor<float>&);
template Tensor<double> log_softmax<double>(const Tensor<double>&);
template Tensor<float> masked_fill<float>(const Tensor<float>&, const Tensor<float>&, float);
template Tensor<double> masked_fill<double>(const Tensor<double>&, const Tensor<double>&, double);
template Tensor<float> cross_entropy<float>(const Tensor<float>&, const std::vector<int32_t>&, int32_t);
template Tensor<double> cross_entropy<double>(const Tensor<double>&, const std::vector<int32_t>&, int32_t);

}  // namespace ag
