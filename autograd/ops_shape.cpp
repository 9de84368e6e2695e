// Shape ops: transpose of the last two dims, reshape, permute (to split and merge heads), concat, split
// select_rows and take. Every result is a fresh contiguous tensor, so every other op can assume row-major
// buffers.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "autograd/ops.h"

namespace ag {

namespace {

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op, const Shape& shape) {
  const int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim)
    throw std::invalid_argument(std::string(op) + ": dim " + std::to_string(dim) +
                                " out of range for shape " + shape_str(shape));
  return d;
}

// Copies src (shape `in`, padded to 4 dims) into dst laid out as in.permuted by perm; with `add`, dst +=.
// Walks the destination in order so writes are contiguous.
template <typename T>
void permute_copy(const T* src, T* dst, const std::array<int64_t, 4>& in, const std::array<int64_t, 4>& perm,
                  bool add) {
  std::array<int64_t, 4> in_stride{};
  in_stride[3] = 1;
  for (int d = 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in[d + 1];
  std::array<int64_t, 4> out_dims{}, step{};
  for (int d = 0; d < 4; ++d) {
    out_dims[d] = in[perm[d]];
    step[d] = in_stride[perm[d]];
  }
  int64_t i = 0;
  for (int64_t a = 0; a < out_dims[0]; ++a)
    for (int64_t b = 0; b < out_dims[1]; ++b)
      for (int64_t c = 0; c < out_dims[2]; ++c) {
        const T* s = src + a * step[0] + b * step[1] + c * step[2];
        if (add)
          for (int64_t d = 0; d < out_dims[3]; ++d) dst[i++] += s[d * step[3]];
        else
          for (int64_t d = 0; d < out_dims[3]; ++d) dst[i++] = s[d * step[3]];
      }
}

}  // namespace

template <typename T>
Tensor<T> permute(const Tensor<T>& a, const std::vector<int64_t>& perm) {
  const int64_t n = a.dim();
  std::vector<int64_t> p(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) p[i] = normalize_dim(perm[i], n, "permute", a.shape());
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<int64_t>(perm.size()) != n || sorted[i] != i)
      throw std::invalid_argument("permute: order is not a permutation of the dims of shape " +
                                  shape_str(a.shape()));
  // Pad to 4 dims in front: padded dim k+off holds original dim k.
  const int64_t off = 4 - n;
  std::array<int64_t, 4> in{1, 1, 1, 1}, fwd{0, 1, 2, 3}, inv{0, 1, 2, 3};
  Shape out_shape(n);
  for (int64_t k = 0; k < n; ++k) {
    in[k + off] = a.shape()[k];
    fwd[k + off] = p[k] + off;
    out_shape[k] = a.shape()[p[k]];
  }
  for (int d = 0; d < 4; ++d) inv[fwd[d]] = d;
  std::array<int64_t, 4> out_dims{1, 1, 1, 1};
  for (int d = 0; d < 4; ++d) out_dims[d] = in[fwd[d]];

  Tensor<T> out = Tensor<T>::empty(out_shape);
  permute_copy(a.data(), out.data(), in, fwd, false);
  if (needs_grad<T>({&a}))
    attach(out, "permute", {a.node_ptr()}, [out_dims, inv](Node<T>& n) {
      // The gradient goes back through the inverse permutation.
      if (const detail::Grad<T> da(*n.inputs[0]); da)
        permute_copy(n.grad.data(), da.data(), out_dims, inv, da.adds());
    });
  return out;
}

template <typename T>
Tensor<T> transpose(const Tensor<T>& a) {
  if (a.dim() < 2)
    throw std::invalid_argument("transpose: needs >= 2 dims, got shape " + shape_str(a.shape()));
  std::vector<int64_t> perm(a.dim());
  for (int64_t i = 0; i < a.dim(); ++i) perm[i] = i;
  std::swap(perm[a.dim() - 1], perm[a.dim() - 2]);
  return permute(a, perm);
}

template <typename T>
Tensor<T> reshape(const Tensor<T>& a, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw std::invalid_argument("reshape: bad target shape " + shape_str(shape) + " for " +
                                  shape_str(a.shape()));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0 && known > 0) shape[infer] = a.numel() / known;
  if (numel_of(shape) != a.numel())
    throw std::invalid_argument("reshape: cannot view shape " + shape_str(a.shape()) + " as " +
                                shape_str(shape));
  Tensor<T> out = Tensor<T>::empty(shape);
  out.values() = a.values();
  if (needs_grad<T>({&a}))
    attach(out, "reshape", {a.node_ptr()}, [](Node<T>& n) {
      if (const detail::Grad<T> da(*n.inputs[0]); da)
        da.put(0, n.numel(), ConstVecMap<T>(n.grad.data(), n.numel()));
    });
  return out;
}

template <typename T>
Tensor<T> concat(const std::vector<Tensor<T>>& parts, int64_t dim) {
  if (parts.empty()) throw std::invalid_argument("concat: no tensors");
  const Shape& first = parts[0].shape();
  const int64_t d = normalize_dim(dim, static_cast<int64_t>(first.size()), "concat", first);
  Shape out_shape = first;
  out_shape[d] = 0;
  for (const auto& p : parts) {
    Shape s = p.shape();
    if (s.size() != first.size())
      throw std::invalid_argument("concat: shapes " + shape_str(first) + " and " + shape_str(s) +
                                  " differ in rank");
    out_shape[d] += s[d];
    s[d] = first[d];
    if (s != first)
      throw std::invalid_argument("concat: shapes " + shape_str(first) + " and " + shape_str(p.shape()) +
                                  " differ outside dim " + std::to_string(d));
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= first[i];
  for (size_t i = d + 1; i < first.size(); ++i) inner *= first[i];
  const int64_t row = out_shape[d] * inner;  // one outer slice of the output

  Tensor<T> out = Tensor<T>::empty(out_shape);
  std::vector<int64_t> widths;  // each part's slice width, per outer index
  std::vector<std::shared_ptr<Node<T>>> inputs;
  bool record = false;
  int64_t at = 0;
  for (const auto& p : parts) {
    const int64_t w = p.size(d) * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.data() + o * row + at, p.data() + o * w, sizeof(T) * w);
    at += w;
    widths.push_back(w);
    inputs.push_back(p.node_ptr());
    record = record || needs_grad<T>({&p});
  }
  if (record)
    attach(out, "concat", std::move(inputs), [widths, outer, row](Node<T>& n) {
      int64_t at = 0;
      for (size_t k = 0; k < widths.size(); ++k) {
        const int64_t w = widths[k];
        if (const detail::Grad<T> dpart(*n.inputs[k]); dpart)
          for (int64_t o = 0; o < outer; ++o)
            dpart.put(o * w, w, ConstVecMap<T>(n.grad.data() + o * row + at, w));
        at += w;
      }
    });
  return out;
}

template <typename T>
Tensor<T> select_rows(const Tensor<T>& a, const std::vector<int64_t>& rows) {
  if (a.dim() < 1) throw std::invalid_argument("select_rows: a scalar has no rows");
  const int64_t D = a.size(-1), N = D == 0 ? 0 : a.numel() / D, R = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < R; ++i)
    if (rows[i] < 0 || rows[i] >= N || (i > 0 && rows[i] <= rows[i - 1]))
      throw std::invalid_argument("select_rows: rows must be strictly increasing in [0, " +
                                  std::to_string(N) + ") for shape " + shape_str(a.shape()) + ", got " +
                                  std::to_string(rows[i]) + " at " + std::to_string(i));
  Tensor<T> out = Tensor<T>::empty({R, D});
  for (int64_t i = 0; i < R; ++i) std::memcpy(out.data() + i * D, a.data() + rows[i] * D, sizeof(T) * D);
  if (needs_grad<T>({&a}))
    attach(out, "select_rows", {a.node_ptr()}, [rows, D, N](Node<T>& n) {
      const detail::Grad<T> da(*n.inputs[0]);
      if (!da) return;
      size_t next = 0;
      for (int64_t r = 0; r < N; ++r) {
        if (next < rows.size() && rows[next] == r) {
          da.put(r * D, D, ConstVecMap<T>(n.grad.data() + static_cast<int64_t>(next) * D, D));
          ++next;
        } else {
          da.zero(r * D, D);
        }
      }
    });
  return out;
}

template <typename T>
std::vector<Tensor<T>> split(const Tensor<T>& a, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = normalize_dim(dim, a.dim(), "split", a.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument("split: negative size for shape " + shape_str(a.shape()));
    total += s;
  }
  if (total != a.size(d))
    throw std::invalid_argument("split: sizes sum to " + std::to_string(total) + " but dim " +
                                std::to_string(d) + " of shape " + shape_str(a.shape()) + " is " +
                                std::to_string(a.size(d)));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= a.shape()[i];
  for (int64_t i = d + 1; i < a.dim(); ++i) inner *= a.shape()[i];
  const int64_t row = a.size(d) * inner;
  std::vector<Tensor<T>> outs;
  int64_t at = 0;
  for (int64_t s : sizes) {
    Shape shape = a.shape();
    shape[d] = s;
    const int64_t w = s * inner;
    Tensor<T> out = Tensor<T>::empty(shape);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.data() + o * w, a.data() + o * row + at, sizeof(T) * w);
    if (needs_grad<T>({&a}))
      attach(out, "split", {a.node_ptr()}, [outer, row, at, w](Node<T>& n) {
        // Each part's backward writes only its own slice of a's gradient.
        const detail::Grad<T> da(*n.inputs[0], detail::GradWrites::kSum);
        if (!da) return;
        for (int64_t o = 0; o < outer; ++o) da.put(o * row + at, w, ConstVecMap<T>(n.grad.data() + o * w, w));
      });
    outs.push_back(std::move(out));
    at += w;
  }
  return outs;
}

template <typename T>
Tensor<T> gather_rows(const Tensor<T>& a, const std::vector<int64_t>& rows) {
  if (a.dim() < 1) throw std::invalid_argument("gather_rows: a scalar has no rows");
  return gather_rows(a, rows, {static_cast<int64_t>(rows.size()), a.size(-1)});
}

template <typename T>
Tensor<T> gather_rows(const Tensor<T>& a, const std::vector<int64_t>& rows, const Shape& shape) {
  if (a.dim() < 1) throw std::invalid_argument("gather_rows: a scalar has no rows");
  const int64_t D = a.size(-1), N = D == 0 ? 0 : a.numel() / D, R = static_cast<int64_t>(rows.size());
  if (shape.empty() || shape.back() != D || numel_of(shape) != R * D)
    throw std::invalid_argument("gather_rows: " + std::to_string(R) + " rows of " + std::to_string(D) +
                                " do not fill shape " + shape_str(shape));
  for (int64_t i = 0; i < R; ++i)
    if (rows[i] < 0 || rows[i] >= N)
      throw std::invalid_argument("gather_rows: row " + std::to_string(rows[i]) + " at " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(N) + ") for shape " +
                                  shape_str(a.shape()));
  Tensor<T> out = Tensor<T>::empty(shape);
  for (int64_t i = 0; i < R; ++i) std::memcpy(out.data() + i * D, a.data() + rows[i] * D, sizeof(T) * D);
  if (needs_grad<T>({&a}))
    attach(out, "gather_rows", {a.node_ptr()}, [rows, D](Node<T>& n) {
      const detail::Grad<T> da(*n.inputs[0], detail::GradWrites::kSum);  // a row may repeat
      if (!da) return;
      for (size_t i = 0; i < rows.size(); ++i)
        VecMap<T>(da.data() + rows[i] * D, D) +=
            ConstVecMap<T>(n.grad.data() + static_cast<int64_t>(i) * D, D);
    });
  return out;
}

template <typename T>
Tensor<T> take(const Tensor<T>& a, const std::vector<int64_t>& index, const Shape& shape) {
  if (numel_of(shape) != static_cast<int64_t>(index.size()))
    throw std::invalid_argument("take: " + std::to_string(index.size()) + " indices for shape " +
                                shape_str(shape));
  const int64_t N = a.numel();
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] < 0 || index[i] >= N)
      throw std::invalid_argument("take: index " + std::to_string(index[i]) + " at " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(N) + ") for shape " +
                                  shape_str(a.shape()));
  Tensor<T> out = Tensor<T>::empty(shape);
  const T* x = a.data();
  T* y = out.data();
  for (size_t i = 0; i < index.size(); ++i) y[i] = x[index[i]];
  if (needs_grad<T>({&a}))
    attach(out, "take", {a.node_ptr()}, [index](Node<T>& n) {
      const detail::Grad<T> da(*n.inputs[0], detail::GradWrites::kSum);  // an index may repeat
      if (!da) return;
      T* d = da.data();
      for (size_t i = 0; i < index.size(); ++i) d[index[i]] += n.grad[i];
    });
  return out;
}

#define ATTOGRAD_INSTANTIATE(T)                                                                   \
  template Tensor<T> permute<T>(const Tensor<T>&, const std::vector<int64_t>&);                   \
  template Tensor<T> transpose<T>(const Tensor<T>&);                                              \
  template Tensor<T> reshape<T>(const Tensor<T>&, Shape);                                         \
  template Tensor<T> concat<T>(const std::vector<Tensor<T>>&, int64_t);                           \
  template Tensor<T> select_rows<T>(const Tensor<T>&, const std::vector<int64_t>&);               \
  template Tensor<T> gather_rows<T>(const Tensor<T>&, const std::vector<int64_t>&);               \
  template Tensor<T> gather_rows<T>(const Tensor<T>&, const std::vector<int64_t>&, const Shape&); \
  template Tensor<T> take<T>(const Tensor<T>&, const std::vector<int64_t>&, const Shape&);        \
  template std::vector<Tensor<T>> split<T>(const Tensor<T>&, const std::vector<int64_t>&, int64_t);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace ag
