// Incremental decoding's key/value cache: every layer's and head's keys and values of the positions a
// CausalLM has read so far, so that reading one more token costs one position's work per layer (its
// projections, its attention over the cached keys, its MLP) instead of a full forward over the whole
// sequence. CausalLM::forward_cached (nn/transformer.h) fills it and reads it.
//
// Layout: one buffer, allocated once for the model's max_len positions, [layer][keys | values][kv head]
// [position][dk]: each kv head's keys (and values) are a contiguous (max_len, dk) row-major block, read in
// place through Eigen maps and the GEMM's strided views; nothing is allocated per position or element.
// With grouped-query attention it holds the n_kv_heads heads only; query head h reads kv head
// h / (n_heads / n_kv_heads).
#pragma once

#include "autograd/tensor.h"
#include "nn/model_shape.h"

namespace nn {

template <typename T>
class KVCache {
 public:
  // Room for shape.max_len positions of a model of this shape (n_layers, n_heads, kv_heads(shape),
  // d_model / n_heads);
  // throws std::invalid_argument for a shape no CausalLM has.
  explicit KVCache(const ModelShape& shape);

  // Positions held: 0 .. size() - 1.
  int64_t size() const { return size_; }
  // The most positions it holds: the model's max_len.
  int64_t capacity() const { return max_len_; }
  int64_t n_layers() const { return n_layers_; }
  int64_t n_heads() const { return n_heads_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }  // the heads it holds
  int64_t head_dim() const { return dk_; }
  // Forgets every position (a new sequence); the memory stays.
  void clear() { size_ = 0; }

  // Whether it was made for a model of this shape.
  bool fits(const ModelShape& shape) const;

  // The keys (values) of one kv head of one layer at the positions held: (size(), dk), row p = position p.
  ag::ConstMatMap<T> keys(int64_t layer, int64_t head) const;
  ag::ConstMatMap<T> values(int64_t layer, int64_t head) const;

  // --- For CausalLM::forward_cached: n new positions size() .. size() + n - 1, layer by layer, then
  // advance(n). Until advance, the new rows are written but not held: a forward that fails half way
  // leaves the cache as it was.
  //
  // Writes layer `layer`'s keys and values of the n new positions, k and v (n, Hkv * dk) row-major with kv
  // head g in columns [g*dk, (g+1)*dk) (Linear outputs), into their heads' blocks. Requires size() + n <=
  // capacity().
  void write(int64_t layer, const T* k, const T* v, int64_t n);
  // z (n, D) = multi-head attention of the n new query rows q (n, D) over the layer's keys and values
  // 0 .. size() + n - 1 (the new ones written), causally: new row i (position size() + i) looks at
  // positions 0 .. size() + i, or with a window w > 0 only the last w of them (size() + i - w, size() + i].
  // softmax(q k^T * scale) v per head, with the arithmetic of ag::attention (the same GEMM products,
  // scaling and softmax_rows), so a position's z has the bits the full forward gives it.
  void attend(int64_t layer, const T* q, int64_t n, T scale, T* z, int64_t window = 0);
  // Holds the n new positions.
  void advance(int64_t n);

 private:
  T* block(int64_t layer, int which, int64_t head);
  const T* block(int64_t layer, int which, int64_t head) const;

  int64_t n_layers_, n_heads_, n_kv_heads_, dk_, max_len_;
  int64_t size_ = 0;
  ag::Buffer<T> data_;    // [layer][keys | values][kv head][max_len][dk]
  ag::Buffer<T> scores_;  // attend's scratch: one block of query rows' scores, (kRowBlock, max_len)
};

extern template class KVCache<float>;
extern template class KVCache<double>;

}  // namespace nn
