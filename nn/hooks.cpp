#include "nn/hooks.h"

#include <stdexcept>

#include "autograd/ops.h"

namespace nn {

namespace {

// Where the position and head axes of a point's value are (nn/hook_points.h); a name without a row (a
// standalone module's "attn.z") is looked up by its last parts.
struct Axes {
  int64_t position = 1, head = -1;
};

// "blocks.L.attn.q, ..." from the table.
std::string points_with_head_axis() {
  std::string out;
  for (const HookPoint& row : kHookPoints)
    if (row.head_axis >= 0)
      out += (out.empty() ? "" : ", ") + std::string(row.in_block ? "blocks.L." : "") + row.name;
  return out;
}

Axes axes_of(const std::string& point) {
  const HookPoint* row = find_hook_point(point);
  if (!row) row = find_hook_point("blocks.0." + point);
  if (!row) return {};
  return {row->position_axis, row->head_axis};
}

// The value with the selected elements taken from `source`: value * (1 - mask) + source * mask, where
// mask (1, ...) is 1 at the chosen positions (and head). Multiplying by exact 0 and 1 keeps unpatched
// elements bit-identical, and gradients reach both the value and the source.
template <typename T>
ag::Tensor<T> blend(const std::string& point, const ag::Tensor<T>& value, const ag::Tensor<T>& source,
                    const std::vector<int64_t>& positions, int64_t head) {
  const ag::Shape& shape = value.shape();
  const ag::Shape per_entry(shape.begin() + 1, shape.end());
  if (source.shape() != shape && source.shape() != per_entry)
    throw std::invalid_argument("hook " + point + ": replacement of shape " + ag::shape_str(source.shape()) +
                                " for a value of shape " + ag::shape_str(shape));
  const Axes axes = axes_of(point);
  if (axes.position >= value.dim() || (head >= 0 && axes.head < 0))
    throw std::invalid_argument("hook " + point + ": has no " + (head >= 0 ? "head" : "position") + " axis");
  for (int64_t p : positions)
    if (p < 0 || p >= shape[axes.position])
      throw std::invalid_argument("hook " + point + ": position " + std::to_string(p) + " outside 0.." +
                                  std::to_string(shape[axes.position] - 1));
  if (head >= 0 && head >= shape[axes.head])
    throw std::invalid_argument("hook " + point + ": head " + std::to_string(head) + " outside 0.." +
                                std::to_string(shape[axes.head] - 1));
  ag::Shape mask_shape = shape;
  mask_shape[0] = 1;
  std::vector<uint8_t> chosen_position(static_cast<size_t>(shape[axes.position]), positions.empty());
  for (int64_t p : positions) chosen_position[static_cast<size_t>(p)] = 1;
  ag::Tensor<T> mask = ag::Tensor<T>::zeros(mask_shape), keep = ag::Tensor<T>::zeros(mask_shape);
  // Strides of the (1, ...) mask, to read each element's position and head index.
  std::vector<int64_t> stride(mask_shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(mask_shape.size()) - 2; d >= 0; --d)
    stride[d] = stride[d + 1] * mask_shape[d + 1];
  for (int64_t i = 0; i < mask.numel(); ++i) {
    const int64_t pos = i / stride[axes.position] % mask_shape[axes.position];
    const bool in_head = head < 0 || i / stride[axes.head] % mask_shape[axes.head] == head;
    const bool patched = in_head && chosen_position[static_cast<size_t>(pos)];
    mask.data()[i] = patched ? T(1) : T(0);
    keep.data()[i] = patched ? T(0) : T(1);
  }
  return ag::add(ag::mul(value, keep), ag::mul(source, mask));
}

}  // namespace

template <typename T>
void Hooks<T>::add(const std::string& point, Fn fn) {
  fns_[point].push_back(std::move(fn));
}

template <typename T>
void Hooks<T>::capture(const std::string& point) {
  add(point, [this, point](const ag::Tensor<T>& value) {
    captured_[point] = value;
    return value;
  });
}

template <typename T>
void Hooks<T>::splice(const std::string& point, Fn fn) {
  auto ends = [&point](const std::string& tail) {
    return point.size() > tail.size() && point.compare(point.size() - tail.size(), tail.size(), tail) == 0;
  };
  const bool in_block = (ends(".mlp.out") || ends(".attn.pattern")) && find_hook_point(point) != nullptr;
  if (!in_block && point != "logits")
    throw std::invalid_argument(
        "hook " + point +
        ": splice replaces a computation: blocks.L.mlp.out, blocks.L.attn.pattern or logits");
  splices_[point] = std::move(fn);
}

template <typename T>
const typename Hooks<T>::Fn* Hooks<T>::spliced(const std::string& point) const {
  auto it = splices_.find(point);
  return it == splices_.end() ? nullptr : &it->second;
}

template <typename T>
void Hooks<T>::grad(const std::string& point) {
  add(point, [this, point](const ag::Tensor<T>& value) {
    if (!ag::grad_enabled())
      throw std::logic_error("hook " + point +
                             ": a gradient was asked for, but the forward records no graph (NoGradScope)");
    ag::Tensor<T> probe = ag::Tensor<T>::zeros(value.shape(), true);
    probes_[point] = probe;
    return ag::add(value, probe);
  });
}

template <typename T>
ag::Tensor<T> Hooks<T>::gradient(const std::string& point) const {
  auto it = probes_.find(point);
  if (it == probes_.end())
    throw std::out_of_range("hook " + point + ": no gradient kept there (call grad(point) before forward)");
  return it->second.grad_tensor();
}

template <typename T>
void Hooks<T>::patch(const std::string& point, const ag::Tensor<T>& replacement) {
  add(point, [point, replacement](const ag::Tensor<T>& value) {
    if (replacement.shape() != value.shape())
      throw std::invalid_argument("hook " + point + ": replacement of shape " +
                                  ag::shape_str(replacement.shape()) + " for a value of shape " +
                                  ag::shape_str(value.shape()));
    return replacement;
  });
}

template <typename T>
void Hooks<T>::patch_positions(const std::string& point, const std::vector<int64_t>& positions,
                               const ag::Tensor<T>& source) {
  add(point, [point, positions, source](const ag::Tensor<T>& value) {
    return blend(point, value, source, positions, -1);
  });
}

template <typename T>
void Hooks<T>::patch_head(const std::string& point, int64_t head, const std::vector<int64_t>& positions,
                          const ag::Tensor<T>& source) {
  if (axes_of(point).head < 0)
    throw std::invalid_argument("hook " + point + ": patch_head needs a point with a head axis (" +
                                points_with_head_axis() + ")");
  if (head < 0) throw std::invalid_argument("hook " + point + ": head " + std::to_string(head) + " < 0");
  add(point, [point, head, positions, source](const ag::Tensor<T>& value) {
    return blend(point, value, source, positions, head);
  });
}

template <typename T>
const ag::Tensor<T>& Hooks<T>::captured(const std::string& point) const {
  auto it = captured_.find(point);
  if (it == captured_.end()) throw std::out_of_range("hook " + point + ": nothing captured there");
  return it->second;
}

template <typename T>
std::vector<std::string> Hooks<T>::points() const {
  std::vector<std::string> out;
  for (const auto& entry : fns_) out.push_back(entry.first);
  for (const auto& entry : splices_)
    if (!fns_.count(entry.first)) out.push_back(entry.first);
  return out;
}

template <typename T>
void Hooks<T>::clear() {
  fns_.clear();
  splices_.clear();
  captured_.clear();
  probes_.clear();
}

template <typename T>
ag::Tensor<T> Hooks<T>::run(const std::string& point, const ag::Tensor<T>& value) {
  auto it = fns_.find(point);
  if (it == fns_.end()) return value;
  ag::Tensor<T> v = value;
  for (const Fn& fn : it->second) v = fn(v);
  return v;
}

template class Hooks<float>;
template class Hooks<double>;

}  // namespace nn
