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

enum class Kind { kAdd, kSub, kMul, kDiv };

// Same-shape operands are split over the threads in chunks of this many elements (elementwise, so the
// split never changes a result).
constexpr int64_t kChunk = 8192;

template <typename Dst, typename Src>
void assign_or_add(Dst& dst, const Src& src, bool assign) {
  if (assign)
    dst = src;
  else
    dst += src;
}
constexpr const char* kNames[] = {"add", "sub", "mul", "div"};

template <typename T>
Tensor<T> binary(const Tensor<T>& a, const Tensor<T>& b, Kind kind) {
  const char* name = kNames[static_cast<int>(kind)];
  if (!a.defined() || !b.defined()) throw std::invalid_argument(std::string(name) + ": undefined tensor");
  const bool same = a.shape() == b.shape();
  const Broadcast bc = same ? Broadcast(a.shape(), a.shape(), name) : Broadcast(a.shape(), b.shape(), name);
  Tensor<T> out = Tensor<T>::empty(bc.out_shape);
  T* o = out.data();
  const T* pa = a.data();
  const T* pb = b.data();
  if (same) {
    parallel_chunks(out.numel(), kChunk, 1, [&](int64_t i, int64_t len) {
      ConstVecMap<T> va(pa + i, len), vb(pb + i, len);
      VecMap<T> vo(o + i, len);
      switch (kind) {
        case Kind::kAdd:
          vo = va + vb;
          break;
        case Kind::kSub:
          vo = va - vb;
          break;
        case Kind::kMul:
          vo = va * vb;
          break;
        case Kind::kDiv:
          vo = va / vb;
          break;
      }
    });
  } else {
    switch (kind) {
      case Kind::kAdd:
        bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { o[i] = pa[ia] + pb[ib]; });
        break;
      case Kind::kSub:
        bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { o[i] = pa[ia] - pb[ib]; });
        break;
      case Kind::kMul:
        bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { o[i] = pa[ia] * pb[ib]; });
        break;
      case Kind::kDiv:
        bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { o[i] = pa[ia] / pb[ib]; });
        break;
    }
  }
  if (!needs_grad<T>({&a, &b})) return out;

  // mul and div need the operands' values; add and sub only shapes.
  const bool keep_values = kind == Kind::kMul || kind == Kind::kDiv;
  Tensor<T> sa = keep_values ? a : Tensor<T>(), sb = keep_values ? b : Tensor<T>();
  attach(out, name, {a.node_ptr(), b.node_ptr()}, [bc, kind, same, sa, sb](Node<T>& n) {
    const T* g = n.grad.data();
    Node<T>& na = *n.inputs[0];
    Node<T>& nb = *n.inputs[1];
    if (same) {
      // A fresh grad buffer (nothing flowed in yet) is assigned, not zero-filled and added to. a and b
      // may be the same node (x + x): then the second write finds the buffer no longer fresh and adds.
      bool fresh_a = false, fresh_b = false;
      T* ga = na.requires_grad ? na.grad_buffer_for_write(fresh_a) : nullptr;
      T* gb = nb.requires_grad ? nb.grad_buffer_for_write(fresh_b) : nullptr;
      const T* pa = sa.defined() ? sa.data() : nullptr;
      const T* pb = sb.defined() ? sb.data() : nullptr;
      parallel_chunks(n.numel(), kChunk, 1, [&](int64_t i, int64_t len) {
        ConstVecMap<T> vg(g + i, len);
        if (ga) {
          VecMap<T> da(ga + i, len);
          switch (kind) {
            case Kind::kAdd:
            case Kind::kSub:
              assign_or_add(da, vg, fresh_a);
              break;
            case Kind::kMul:
              assign_or_add(da, vg * ConstVecMap<T>(pb + i, len), fresh_a);
              break;
            case Kind::kDiv:
              assign_or_add(da, vg / ConstVecMap<T>(pb + i, len), fresh_a);
              break;
          }
        }
        if (gb) {
          VecMap<T> db(gb + i, len);
          switch (kind) {
            case Kind::kAdd:
              assign_or_add(db, vg, fresh_b);
              break;
            case Kind::kSub:
              assign_or_add(db, -vg, fresh_b);
              break;
            case Kind::kMul:
              assign_or_add(db, vg * ConstVecMap<T>(pa + i, len), fresh_b);
              break;
            case Kind::kDiv: {  // d(a/b)/db = -a/b^2
              ConstVecMap<T> vb(pb + i, len);
              assign_or_add(db, -(vg * ConstVecMap<T>(pa + i, len) / (vb * vb)), fresh_b);
              break;
            }
          }
        }
      });
      return;
    }
    if (na.requires_grad) {
      T* ga = na.grad_buffer();
      switch (kind) {
        case Kind::kAdd:
        case Kind::kSub:
          bc.for_each([&](int64_t i, int64_t ia, int64_t) { ga[ia] += g[i]; });
          break;
        case Kind::kMul: {
          const T* pb = sb.data();
          bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { ga[ia] += g[i] * pb[ib]; });
          break;
        }
        case Kind::kDiv: {
          const T* pb = sb.data();
          bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { ga[ia] += g[i] / pb[ib]; });
          break;
        }
      }
    }
    if (nb.requires_grad) {
      T* gb = nb.grad_buffer();
      switch (kind) {
        case Kind::kAdd:
          bc.for_each([&](int64_t i, int64_t, int64_t ib) { gb[ib] += g[i]; });
          break;
        case Kind::kSub:
          bc.for_each([&](int64_t i, int64_t, int64_t ib) { gb[ib] -= g[i]; });
          break;
        case Kind::kMul: {
          const T* pa = sa.data();
          bc.for_each([&](int64_t i, int64_t ia, int64_t ib) { gb[ib] += g[i] * pa[ia]; });
          break;
        }
        case Kind::kDiv: {
          const T* pa = sa.data();
          const T* pb = sb.data();
          bc.for_each(
              [&](int64_t i, int64_t ia, int64_t ib) { gb[ib] -= g[i] * pa[ia] / (pb[ib] * pb[ib]); });
          break;
        }
      }
    }
  });
  return out;
}

}  // namespace

template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  return binary(a, b, Kind::kAdd);
}
template <typename T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  return binary(a, b, Kind::kSub);
}
template <typename T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  return binary(a, b, Kind::kMul);
}
template <typename T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  return binary(a, b, Kind::kDiv);
}

// out = a * s
template <typename T>
Tensor<T> scale(const Tensor<T>& a, T s) {
  Tensor<T> out = Tensor<T>::empty(a.shape());
  out.vec() = a.vec() * s;
  if (needs_grad<T>({&a}))
    attach(out, "scale", {a.node_ptr()}, [s](Node<T>& n) {
      VecMap<T>(n.inputs[0]->grad_buffer(), n.numel()) += ConstVecMap<T>(n.grad.data(), n.numel()) * s;
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
      VecMap<T>(n.inputs[0]->grad_buffer(), n.numel()) += ConstVecMap<T>(n.grad.data(), n.numel());
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
