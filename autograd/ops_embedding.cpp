// Embedding lookup: rows of a (V, D) weight picked by integer ids. Backward scatter-adds each output row's
// gradient into the weight row it came from, so an id used twice receives the sum.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"

namespace ag {

template <typename T>
Tensor<T> embedding(const Tensor<T>& weight, const std::vector<int32_t>& ids, const Shape& ids_shape) {
  if (!weight.defined()) throw std::invalid_argument("embedding: weight is undefined");
  if (weight.dim() != 2)
    throw std::invalid_argument("embedding: weight must be 2-d (V, D), got shape " +
                                shape_str(weight.shape()));
  for (int64_t d : ids_shape)
    if (d < 0)
      throw std::invalid_argument("embedding: negative dimension in ids shape " + shape_str(ids_shape));
  if (static_cast<int64_t>(ids.size()) != numel_of(ids_shape))
    throw std::invalid_argument("embedding: " + std::to_string(ids.size()) + " ids do not fill ids shape " +
                                shape_str(ids_shape));
  const int64_t vocab = weight.size(0), dim = weight.size(1);
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      throw std::invalid_argument("embedding: id " + std::to_string(id) +
                                  " is outside [0, V) for V = " + std::to_string(vocab) + " (weight shape " +
                                  shape_str(weight.shape()) + ")");

  Shape out_shape = ids_shape;
  out_shape.push_back(dim);
  Tensor<T> out = Tensor<T>::empty(out_shape);
  const T* w = weight.data();
  T* y = out.data();
  for (size_t i = 0; i < ids.size(); ++i)
    std::copy_n(w + static_cast<int64_t>(ids[i]) * dim, dim, y + static_cast<int64_t>(i) * dim);

  if (needs_grad<T>({&weight}))
    attach(out, "embedding", {weight.node_ptr()}, [ids, dim](Node<T>& n) {
      // A row receives the sum of the gradients of every position that looked it up.
      const detail::Grad<T> dweight(*n.inputs[0], detail::GradWrites::kSum);
      if (!dweight) return;
      const T* dy = n.grad.data();
      // Serial: ids repeat (every sequence starts with BOS), so rows would race under threads.
      for (size_t i = 0; i < ids.size(); ++i)
        dweight.put(static_cast<int64_t>(ids[i]) * dim, dim,
                    ConstVecMap<T>(dy + static_cast<int64_t>(i) * dim, dim));
    });
  return out;
}

template Tensor<float> embedding<float>(const Tensor<float>&, const std::vector<int32_t>&, const Shape&);
template Tensor<double> embedding<double>(const Tensor<double>&, const std::vector<int32_t>&, const Shape&);

}  // namespace ag
