#include "nn/kv_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "autograd/gemm.h"
#include "autograd/softmax_row.h"

namespace nn {

namespace {
// Query rows per block of attend: their scores share one width (the last row's keys), as ag::attention's
// blocks do.
constexpr int64_t kRowBlock = 16;
constexpr int kKeys = 0, kValues = 1;
}  // namespace

template <typename T>
KVCache<T>::KVCache(const ModelShape& s)
    : n_layers_(s.n_layers), n_heads_(s.n_heads), n_kv_heads_(kv_heads(s)), dk_(0), max_len_(s.max_len) {
  if (s.n_layers < 1 || s.n_heads < 1 || s.d_model < 1 || s.d_model % s.n_heads != 0 || s.max_len < 1 ||
      n_kv_heads_ < 1 || s.n_heads % n_kv_heads_ != 0)
    throw std::invalid_argument("KVCache: no model has n_layers " + std::to_string(s.n_layers) +
                                ", n_heads " + std::to_string(s.n_heads) + ", n_kv_heads " +
                                std::to_string(n_kv_heads_) + ", d_model " + std::to_string(s.d_model) +
                                ", max_len " + std::to_string(s.max_len));
  dk_ = s.d_model / s.n_heads;
  data_.resize(static_cast<size_t>(n_layers_ * 2 * n_kv_heads_ * max_len_ * dk_));
  scores_.resize(static_cast<size_t>(std::min(kRowBlock, max_len_) * max_len_));
}

template <typename T>
bool KVCache<T>::fits(const ModelShape& s) const {
  return s.n_layers == n_layers_ && s.n_heads == n_heads_ && kv_heads(s) == n_kv_heads_ &&
         s.d_model == n_heads_ * dk_ && s.max_len == max_len_;
}

template <typename T>
T* KVCache<T>::block(int64_t layer, int which, int64_t head) {
  return data_.data() + ((layer * 2 + which) * n_kv_heads_ + head) * max_len_ * dk_;
}

template <typename T>
const T* KVCache<T>::block(int64_t layer, int which, int64_t head) const {
  return data_.data() + ((layer * 2 + which) * n_kv_heads_ + head) * max_len_ * dk_;
}

template <typename T>
ag::ConstMatMap<T> KVCache<T>::keys(int64_t layer, int64_t head) const {
  if (layer < 0 || layer >= n_layers_ || head < 0 || head >= n_kv_heads_)
    throw std::out_of_range("KVCache::keys: no layer " + std::to_string(layer) + " head " +
                            std::to_string(head));
  return ag::ConstMatMap<T>(block(layer, kKeys, head), size_, dk_);
}

template <typename T>
ag::ConstMatMap<T> KVCache<T>::values(int64_t layer, int64_t head) const {
  if (layer < 0 || layer >= n_layers_ || head < 0 || head >= n_kv_heads_)
    throw std::out_of_range("KVCache::values: no layer " + std::to_string(layer) + " head " +
                            std::to_string(head));
  return ag::ConstMatMap<T>(block(layer, kValues, head), size_, dk_);
}

template <typename T>
void KVCache<T>::write(int64_t layer, const T* k, const T* v, int64_t n) {
  if (n < 0 || size_ + n > max_len_)
    throw std::length_error("KVCache::write: " + std::to_string(n) + " new positions after " +
                            std::to_string(size_) + " exceed max_len " + std::to_string(max_len_));
  const int64_t D = n_kv_heads_ * dk_;
  for (int64_t h = 0; h < n_kv_heads_; ++h) {
    T* kh = block(layer, kKeys, h) + size_ * dk_;
    T* vh = block(layer, kValues, h) + size_ * dk_;
    for (int64_t i = 0; i < n; ++i) {
      std::copy(k + i * D + h * dk_, k + i * D + (h + 1) * dk_, kh + i * dk_);
      std::copy(v + i * D + h * dk_, v + i * D + (h + 1) * dk_, vh + i * dk_);
    }
  }
}

template <typename T>
void KVCache<T>::attend(int64_t layer, const T* q, int64_t n, T scale, T* z, int64_t window) {
  if (n < 0 || size_ + n > max_len_)
    throw std::length_error("KVCache::attend: " + std::to_string(n) + " new positions after " +
                            std::to_string(size_) + " exceed max_len " + std::to_string(max_len_));
  const int64_t D = n_heads_ * dk_;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  T* p = scores_.data();
  const int64_t group = n_heads_ / n_kv_heads_;  // query heads per kv head
  for (int64_t h = 0; h < n_heads_; ++h) {
    const T* kh = block(layer, kKeys, h / group);    // (max_len, dk)
    const T* vh = block(layer, kValues, h / group);  // (max_len, dk)
    for (int64_t i0 = 0; i0 < n; i0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, n - i0);
      // The block's rows see keys 0 .. size_ + i0 + rows - 1 at most; row r sees its first
      // size_ + i0 + r + 1 of them, the rest masked (-inf, so weight 0), as ag::attention's causal rows.
      const int64_t width = size_ + i0 + rows;
      // scores = q k^T, then the scaling, as ag::attention: the product first.
      ag::gemm<T>(rows, width, dk_, ag::row_major(q + i0 * D + h * dk_, D),
                  ag::row_major(kh, dk_).transposed(), p, width, false);
      for (int64_t r = 0; r < rows; ++r) {
        T* pr = p + r * width;
        const int64_t end = size_ + i0 + r + 1;
        ag::VecMap<T>(pr, end) *= scale;
        std::fill(pr + end, pr + width, ninf);
        if (window > 0 && end > window) std::fill(pr, pr + end - window, ninf);  // before the window
      }
      ag::softmax_rows(p, p, rows, width, width);
      // z's head columns = weights v.
      ag::gemm<T>(rows, dk_, width, ag::row_major<T>(p, width), ag::row_major(vh, dk_), z + i0 * D + h * dk_,
                  D, false);
    }
  }
}

template <typename T>
void KVCache<T>::advance(int64_t n) {
  if (n < 0 || size_ + n > max_len_)
    throw std::length_error("KVCache::advance: " + std::to_string(n) + " new positions after " +
                            std::to_string(size_) + " exceed max_len " + std::to_string(max_len_));
  size_ += n;
}

template class KVCache<float>;
template class KVCache<double>;

}  // namespace nn
