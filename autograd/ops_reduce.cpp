// Reductions: sum and mean, over all elements or along one dim (keepdim as in PyTorch). A dim splits the
// buffer into (outer, size, inner) blocks; the reduction is an Eigen colwise sum over each block.
#include <stdexcept>

#include "autograd/ops.h"

namespace ag {

namespace {

struct Blocks {
  int64_t outer = 1, size = 1, inner = 1;
};

Blocks blocks_of(const Shape& shape, int64_t& dim, const char* op) {
  const int64_t n = static_cast<int64_t>(shape.size());
  if (dim < 0) dim += n;
  if (dim < 0 || dim >= n)
    throw std::invalid_argument(std::string(op) + ": dim out of range for shape " + shape_str(shape));
  Blocks b;
  for (int64_t i = 0; i < dim; ++i) b.outer *= shape[i];
  b.size = shape[dim];
  for (int64_t i = dim + 1; i < n; ++i) b.inner *= shape[i];
  return b;
}

// out = factor * sum over dim; the shared body of sum and mean along a dim.
template <typename T>
Tensor<T> reduce_dim(const Tensor<T>& a, int64_t dim, bool keepdim, T factor, const char* op) {
  const Blocks b = blocks_of(a.shape(), dim, op);
  Shape shape = a.shape();
  if (keepdim)
    shape[dim] = 1;
  else
    shape.erase(shape.begin() + dim);
  Tensor<T> out = Tensor<T>::empty(shape);
  for (int64_t o = 0; o < b.outer; ++o)
    MatMap<T>(out.data() + o * b.inner, 1, b.inner) =
        ConstMatMap<T>(a.data() + o * b.size * b.inner, b.size, b.inner).colwise().sum() * factor;
  if (needs_grad<T>({&a}))
    attach(out, op, {a.node_ptr()}, [b, factor](Node<T>& n) {
      const detail::Grad<T> da(*n.inputs[0]);
      if (!da) return;
      for (int64_t o = 0; o < b.outer; ++o)
        da.put(MatMap<T>(da.data() + o * b.size * b.inner, b.size, b.inner).rowwise(),
               ConstRowMap<T>(n.grad.data() + o * b.inner, b.inner) * factor);
    });
  return out;
}

template <typename T>
Tensor<T> reduce_all(const Tensor<T>& a, T factor, const char* op) {
  Tensor<T> out = Tensor<T>::scalar(a.vec().sum() * factor);
  if (needs_grad<T>({&a}))
    attach(out, op, {a.node_ptr()}, [factor](Node<T>& n) {
      Node<T>& in = *n.inputs[0];
      if (const detail::Grad<T> da(in); da)
        da.put(0, in.numel(), Vec<T>::Constant(in.numel(), n.grad[0] * factor));
    });
  return out;
}

}  // namespace

template <typename T>
Tensor<T> sum(const Tensor<T>& a) {
  return reduce_all(a, T(1), "sum");
}

template <typename T>
Tensor<T> mean(const Tensor<T>& a) {
  if (a.numel() == 0) throw std::invalid_argument("mean: empty tensor of shape " + shape_str(a.shape()));
  return reduce_all(a, T(1) / T(a.numel()), "mean");
}

template <typename T>
Tensor<T> sum(const Tensor<T>& a, int64_t dim, bool keepdim) {
  return reduce_dim(a, dim, keepdim, T(1), "sum");
}

template <typename T>
Tensor<T> mean(const Tensor<T>& a, int64_t dim, bool keepdim) {
  int64_t d = dim;
  const Blocks b = blocks_of(a.shape(), d, "mean");
  if (b.size == 0) throw std::invalid_argument("mean: empty dim in shape " + shape_str(a.shape()));
  return reduce_dim(a, dim, keepdim, T(1) / T(b.size), "mean");
}

#define ATTOGRAD_INSTANTIATE(T)                               \
  template Tensor<T> sum<T>(const Tensor<T>&);                \
  template Tensor<T> mean<T>(const Tensor<T>&);               \
  template Tensor<T> sum<T>(const Tensor<T>&, int64_t, bool); \
  template Tensor<T> mean<T>(const Tensor<T>&, int64_t, bool);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace ag
