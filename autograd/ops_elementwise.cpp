// Elementwise binary ops with NumPy broadcasting (add, sub, mul, div) and the scalar ones (scale,
// add_scalar, neg). Same-shape operands take an Eigen array fast path; the general case walks the
// broadcast index space once. The gradient of a broadcast input is summed over its broadcast dims.
#include <algorithm>
#include <stdexcept>

#include "autograd/broadcast.h"
#include "autograd/ops.h"
#include "autograd/threads.h"

namespace ag {

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  return Broadcast(a, b, op).out_shape;
}

Broadcast::Broadcast(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  if (n > 4)
    throw std::invalid_argument(std::string(op) + ": more than 4 dims: " + shape_str(a) + " and " +
                                shape_str(b));
  auto dim_of = [](const Shape& s, size_t from_end) {
    return from_end < s.size() ? s[s.size() - 1 - from_end] : 1;
  };
  out_shape.assign(n, 1);
  std::array<int64_t, 4> contiguous_a{}, contiguous_b{};
  int64_t sa = 1, sb = 1;
  for (size_t k = 0; k < n; ++k) {  // k counts dims from the last
    const int64_t da = dim_of(a, k), db = dim_of(b, k);
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                                  " do not broadcast (dim " + std::to_string(n - 1 - k) + ": " +
                                  std::to_string(da) + " vs " + std::to_string(db) + ")");
    const int64_t d = std::max(da, db);
    out_shape[n - 1 - k] = d;
    dims[3 - k] = d;
    contiguous_a[3 - k] = (da == 1) ? 0 : sa;
    contiguous_b[3 - k] = (db == 1) ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  stride_a = contiguous_a;
  stride_b = contiguous_b;
}

namespace {

// The binary ops as a table: per op, its forward and its gradient with respect to each operand, in terms
// of the operands a, b and the output's gradient g. Each expression is written once, for any operand type,
// so the same row serves Eigen arrays (the same-shape path, a chunk at a time) and scalars (the
// broadcasting loop).
#define ATTOGRAD_BINARY_OP(Name, forward_expr, da_expr, db_expr)                                            \
  struct Name {                                                                                             \
    static constexpr const char* kName = #Name;                                                             \
    template <typename A, typename B>                                                                       \
    static auto forward(const A& a, const B& b) {                                                           \
      return forward_expr;                                                                                  \
    }                                                                                                       \
    template <typename G, typename A, typename B>                                                           \
    static auto da([[maybe_unused]] const G& g, [[maybe_unused]] const A& a, [[maybe_unused]] const B& b) { \
      return da_expr;                                                                                       \
    }                                                                                                       \
    template <typename G, typename A, typename B>                                                           \
    static auto db([[maybe_unused]] const G& g, [[maybe_unused]] const A& a, [[maybe_unused]] const B& b) { \
      return db_expr;                                                                                       \
    }                                                                                                       \
  };
namespace rows {
// clang-format off
//                 op   forward  d/da    d/db
ATTOGRAD_BINARY_OP(add, a + b,   g,      g)
ATTOGRAD_BINARY_OP(sub, a - b,   g,      -g)
ATTOGRAD_BINARY_OP(mul, a * b,   g * b,  g * a)
ATTOGRAD_BINARY_OP(div, a / b,   g / b,  -(g * a / (b * b)))  // d(a/b)/db = -a/b^2
// clang-format on
}  // namespace rows
#undef ATTOGRAD_BINARY_OP

// Same-shape operands are split over the threads in chunks of this many elements (elementwise, so the
// split never changes a result).
constexpr int64_t kChunk = 8192;

template <typename Op, typename T>
Tensor<T> binary(const Tensor<T>& a, const Tensor<T>& b) {
  const char* name = Op::kName;
  if (!a.defined() || !b.defined()) throw std::invalid_argument(std::string(name) + ": undefined tensor");
  const bool same = a.shape() == b.shape();
  const Broadcast bc = same ? Broadcast(a.shape(), a.shape(), name) : Broadcast(a.shape(), b.shape(), name);
  Tensor<T> out = Tensor<T>::empty(bc.out_shape);
  T* po = out.data();
  const T* pa = a.data();
  const T* pb = b.data();
  if (same)
    parallel_chunks(out.numel(), kChunk, 1, [&](int64_t i, int64_t len) {
      VecMap<T>(po + i, len) = Op::forward(ConstVecMap<T>(pa + i, len), ConstVecMap<T>(pb + i, len));
    });
  else
    bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { po[i] = Op::forward(pa[ia], pb[ib]); });
  if (!needs_grad<T>({&a, &b})) return out;

  attach(out, name, {a.node_ptr(), b.node_ptr()}, [bc, same](Node<T>& n) {
    Node<T>& na = *n.inputs[0];
    Node<T>& nb = *n.inputs[1];
    const T* dout = n.grad.data();
    const T* pa = na.value.data();
    const T* pb = nb.value.data();
    if (same) {
      // a and b may be one node (x * x): da is acquired first, so its writes assign and db's add.
      const detail::Grad<T> da(na), db(nb);
      parallel_chunks(n.numel(), kChunk, 1, [&](int64_t i, int64_t len) {
        ConstVecMap<T> g(dout + i, len), va(pa + i, len), vb(pb + i, len);
        if (da) da.put(i, len, Op::da(g, va, vb));
        if (db) db.put(i, len, Op::db(g, va, vb));
      });
      return;
    }
    // A broadcast operand sums the gradients of every output element it was repeated into.
    if (const detail::Grad<T> da(na, detail::GradWrites::kSum); da) {
      T* pda = da.data();
      bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { pda[ia] += Op::da(dout[i], pa[ia], pb[ib]); });
    }
    if (const detail::Grad<T> db(nb, detail::GradWrites::kSum); db) {
      T* pdb = db.data();
      bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { pdb[ib] += Op::db(dout[i], pa[ia], pb[ib]); });
    }
  });
  return out;
}

}  // namespace

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  return binary<rows::add>(a, b);
}
template <typename T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  return binary<rows::sub>(a, b);
}
template <typename T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  return binary<rows::mul>(a, b);
}
template <typename T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  return binary<rows::div>(a, b);
}

// out = a * s
template <typename T>
Tensor<T> scale(const Tensor<T>& a, T s) {
  Tensor<T> out = Tensor<T>::empty(a.shape());
  out.vec() = a.vec() * s;
  if (needs_grad<T>({&a}))
    attach(out, "scale", {a.node_ptr()}, [s](Node<T>& n) {
      if (const detail::Grad<T> da(*n.inputs[0]); da)
        da.put(0, n.numel(), ConstVecMap<T>(n.grad.data(), n.numel()) * s);
    });
  return out;
}

// out = a + s
template <typename T>
Tensor<T> add_scalar(const Tensor<T>& a, T s) {
  Tensor<T> out = Tensor<T>::empty(a.shape());
  out.vec() = a.vec() + s;
  if (needs_grad<T>({&a}))
    attach(out, "add_scalar", {a.node_ptr()}, [](Node<T>& n) {
      if (const detail::Grad<T> da(*n.inputs[0]); da)
        da.put(0, n.numel(), ConstVecMap<T>(n.grad.data(), n.numel()));
    });
  return out;
}

template <typename T>
Tensor<T> neg(const Tensor<T>& a) {
  return scale(a, T(-1));
}

#define ATTOGRAD_INSTANTIATE(T)                                  \
  template Tensor<T> add<T>(const Tensor<T>&, const Tensor<T>&); \
  template Tensor<T> sub<T>(const Tensor<T>&, const Tensor<T>&); \
  template Tensor<T> mul<T>(const Tensor<T>&, const Tensor<T>&); \
  template Tensor<T> div<T>(const Tensor<T>&, const Tensor<T>&); \
  template Tensor<T> scale<T>(const Tensor<T>&, T);              \
  template Tensor<T> add_scalar<T>(const Tensor<T>&, T);         \
  template Tensor<T> neg<T>(const Tensor<T>&);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace ag
