// Dictionary activations: the ones SAELens trains beside ReLU and TopK (dictionary/sae.h's sae_forward and
// dictionary/clt.h's transcoders use them). JumpReLU and its step function learn their thresholds through
// SAELens's straight-through pseudo-derivatives with a bandwidth; BatchTopK keeps the batch's largest
// entries. Forward and backward side by side.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace ag {

namespace {

template <typename T>
void check_threshold_op(const char* op, const Tensor<T>& pre, const Tensor<T>& threshold, T bandwidth) {
  if (pre.dim() != 2 || threshold.dim() != 1 || threshold.size(0) != pre.size(1) || !(bandwidth > 0))
    throw std::invalid_argument(std::string(op) +
                                ": expected pre (N, M), threshold (M) and bandwidth > 0, got " +
                                std::to_string(pre.dim()) + "-d pre, " + std::to_string(threshold.dim()) +
                                "-d threshold, bandwidth " + std::to_string(bandwidth));
}

// d threshold_j = sum_n scale_j K((pre_nj - threshold_j) / bandwidth) dy_nj with scale_j = -threshold_j /
// bandwidth (JumpReLU) or -1 / bandwidth (the step): the pseudo-derivative both ops share.
template <typename T>
void threshold_grad(Node<T>& node, bool times_threshold, T bandwidth) {
  const detail::Grad<T> dthreshold(*node.inputs[1]);
  if (!dthreshold) return;
  const Node<T>& pre = *node.inputs[0];
  const T* x = pre.value.data();
  const T* th = node.inputs[1]->value.data();
  const T* dy = node.grad.data();
  const int64_t M = node.inputs[1]->numel(), N = pre.numel() / M;
  Vec<T> g = Vec<T>::Zero(M);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < M; ++j) {
      const T u = (x[n * M + j] - th[j]) / bandwidth;
      if (u > T(-0.5) && u < T(0.5)) g[j] += dy[n * M + j];
    }
  for (int64_t j = 0; j < M; ++j) g[j] *= -(times_threshold ? th[j] : T(1)) / bandwidth;
  dthreshold.put(0, M, g);
}

}  // namespace

template <typename T>
Tensor<T> jumprelu(const Tensor<T>& pre, const Tensor<T>& threshold, T bandwidth) {
  check_threshold_op("jumprelu", pre, threshold, bandwidth);
  const int64_t N = pre.size(0), M = pre.size(1);
  Tensor<T> f = Tensor<T>::zeros({N, M});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < M; ++j) {
      const T v = pre.data()[n * M + j];
      if (v > threshold.data()[j]) f.data()[n * M + j] = v;
    }
  if (needs_grad<T>({&pre, &threshold}))
    attach(f, "jumprelu", {pre.node_ptr(), threshold.node_ptr()}, [bandwidth](Node<T>& node) {
      {
        const detail::Grad<T> dpre(*node.inputs[0]);
        if (dpre) {
          const int64_t M = node.inputs[1]->numel(), NM = node.inputs[0]->numel();
          const T* x = node.inputs[0]->value.data();
          const T* th = node.inputs[1]->value.data();
          Vec<T> g(NM);
          for (int64_t i = 0; i < NM; ++i) g[i] = x[i] > th[i % M] ? node.grad.data()[i] : T(0);
          dpre.put(0, NM, g);
        }
      }
      threshold_grad(node, true, bandwidth);
    });
  return f;
}

template <typename T>
Tensor<T> jumprelu_step(const Tensor<T>& pre, const Tensor<T>& threshold, T bandwidth) {
  check_threshold_op("jumprelu_step", pre, threshold, bandwidth);
  const int64_t N = pre.size(0), M = pre.size(1);
  Tensor<T> h = Tensor<T>::zeros({N, M});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < M; ++j) h.data()[n * M + j] = pre.data()[n * M + j] > threshold.data()[j] ? 1 : 0;
  if (needs_grad<T>({&pre, &threshold}))
    attach(h, "jumprelu_step", {pre.node_ptr(), threshold.node_ptr()}, [bandwidth](Node<T>& node) {
      {
        const detail::Grad<T> dpre(*node.inputs[0]);  // the step is flat: no gradient to pre
        if (dpre) dpre.zero(0, node.inputs[0]->numel());
      }
      threshold_grad(node, false, bandwidth);
    });
  return h;
}

template <typename T>
Tensor<T> batch_topk_relu(const Tensor<T>& pre, int64_t keep) {
  if (pre.dim() != 2 || keep < 1)
    throw std::invalid_argument("batch_topk_relu: expected pre (N, M) and keep >= 1, got " +
                                std::to_string(pre.dim()) + "-d pre and keep " + std::to_string(keep));
  const int64_t NM = pre.numel();
  std::vector<std::pair<T, int64_t>> positive;
  for (int64_t i = 0; i < NM; ++i)
    if (pre.data()[i] > T(0)) positive.emplace_back(pre.data()[i], i);
  if (static_cast<int64_t>(positive.size()) > keep) {
    std::nth_element(positive.begin(), positive.begin() + (keep - 1), positive.end(),
                     [](const auto& a, const auto& b) {
                       return a.first > b.first || (a.first == b.first && a.second < b.second);
                     });
    positive.resize(static_cast<size_t>(keep));
  }
  Tensor<T> f = Tensor<T>::zeros(pre.shape());
  auto kept = std::make_shared<std::vector<int64_t>>();
  kept->reserve(positive.size());
  for (const auto& [v, i] : positive) {
    f.data()[i] = v;
    kept->push_back(i);
  }
  if (needs_grad<T>({&pre}))
    attach(f, "batch_topk_relu", {pre.node_ptr()}, [kept, NM](Node<T>& node) {
      const detail::Grad<T> dpre(*node.inputs[0]);
      if (!dpre) return;
      Vec<T> g = Vec<T>::Zero(NM);
      for (int64_t i : *kept) g[i] = node.grad.data()[i];
      dpre.put(0, NM, g);
    });
  return f;
}

template Tensor<float> jumprelu(const Tensor<float>&, const Tensor<float>&, float);
template Tensor<double> jumprelu(const Tensor<double>&, const Tensor<double>&, double);
template Tensor<float> jumprelu_step(const Tensor<float>&, const Tensor<float>&, float);
template Tensor<double> jumprelu_step(const Tensor<double>&, const Tensor<double>&, double);
template Tensor<float> batch_topk_relu(const Tensor<float>&, int64_t);
template Tensor<double> batch_topk_relu(const Tensor<double>&, int64_t);

}  // namespace ag
