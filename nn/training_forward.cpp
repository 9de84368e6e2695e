#include "nn/training_forward.h"

#include <cmath>
#include <optional>
#include <stdexcept>

namespace nn {

template <typename T>
ag::Tensor<T> attention_input(const TransformerBlock<T>& block, const ag::Tensor<T>& h) {
  return block.ln1->forward_fused(h);
}

template <typename T>
ag::Tensor<T> mlp_residual(const TransformerBlock<T>& block, const ag::Tensor<T>& resid_mid,
                           const ag::Tensor<T>& block_input) {
  if (!block.mlp) return resid_mid;
  const MLP<T>& mlp = *block.mlp;
  const ag::Tensor<T>& in = block.parallel ? block_input : resid_mid;  // what ln2 reads
  if (mlp.gate) {  // ln2's output feeds two products: kept, not recomputed in each
    const ag::Tensor<T> x = block.ln2->forward_fused(in);
    const ag::Tensor<T> gate = ag::linear(x, mlp.gate->weight, mlp.gate->bias);
    const ag::Tensor<T> up = ag::linear(x, mlp.fc1.weight, mlp.fc1.bias);
    return ag::linear(activate(mlp.activation, gate) * up, mlp.fc2.weight, mlp.fc2.bias,
                      /*residual=*/resid_mid);
  }
  const ag::Tensor<T> pre = block.ln2->forward_linear(in, mlp.fc1.weight, mlp.fc1.bias);
  switch (mlp.activation) {
    case Activation::gelu:
      return ag::gelu_linear(pre, mlp.fc2.weight, mlp.fc2.bias, /*residual=*/resid_mid);
    case Activation::gelu_erf:
    case Activation::relu:
    case Activation::relu2:
    case Activation::swiglu:  // gated: handled above
    case Activation::geglu:
      return ag::linear(activate(mlp.activation, pre), mlp.fc2.weight, mlp.fc2.bias, /*residual=*/resid_mid);
  }
  throw std::logic_error("mlp_residual: unknown activation");
}

template <typename T>
ag::Tensor<T> positioned(const MultiHeadAttention<T>& attn, const ag::Tensor<T>& y, int64_t first_position,
                         const RMSNorm<T>* norm) {
  ag::Tensor<T> out = y;
  if (norm) {  // over each head's dk values: (B, T, H, dk) for the op, back to (B, T, D)
    const ag::Shape shape = y.shape();
    out = ag::reshape(
        norm->forward_fused(ag::reshape(y, {y.size(0), y.size(1), y.size(2) / attn.dk, attn.dk})), shape);
  }
  if (!attn.rotary_dims) return out;
  return ag::rotary(out, attn.dk, attn.rotary_dims, attn.rotary_base, first_position);
}

template <typename T>
ag::Tensor<T> soft_cap(const ag::Tensor<T>& logits, double cap) {
  if (cap <= 0) return logits;
  return ag::scale(ag::tanh(ag::scale(logits, T(1 / cap))), T(cap));
}

template <typename T>
ag::Tensor<T> unembed(const CausalLM<T>& model, const ag::Tensor<T>& h) {
  return soft_cap(model.ln_f->forward_linear(h, model.lm_head.weight, model.lm_head.bias),
                  model.shape.logit_softcap);
}

namespace {

// h + attn(ln1(h)): a block's first half, fused.
template <typename T>
ag::Tensor<T> attention_residual(const TransformerBlock<T>& block, const ag::Tensor<T>& h,
                                 const ag::Tensor<T>& mask) {
  const MultiHeadAttention<T>& a = block.attn;
  const ag::Tensor<T> x = attention_input(block, h);
  const ag::Tensor<T> z =
      ag::attention(positioned(a, ag::linear(x, a.wq.weight, a.wq.bias), 0, a.q_norm.get()),
                    positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), 0, a.k_norm.get()),
                    ag::linear(x, a.wv.weight, a.wv.bias), a.n_heads, mask,
                    a.score_scale());  // (B, T, D): the heads side by side
  return ag::linear(z, a.wo.weight, a.wo.bias, /*residual=*/h);
}

}  // namespace

template <typename T>
ag::Tensor<T> training_forward(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                               int64_t t, const std::vector<uint8_t>& is_padding) {
  ag::Tensor<T> h = model.embed(ids, batch, t);
  const std::vector<ag::Tensor<T>> masks = model.attention_masks(batch, t, is_padding);
  for (size_t l = 0; l < model.blocks.size(); ++l)
    h = mlp_residual(*model.blocks[l], attention_residual(*model.blocks[l], h, masks[l]), h);
  return unembed(model, h);
}

namespace {

// The positions P every sequence scores, when `rows` is exactly {b * t + p : b < batch, p in P} for one
// contiguous run P of positions (grokking's answer position, a reversal's second half); else empty.
std::vector<int64_t> shared_positions(const std::vector<int64_t>& rows, int64_t batch, int64_t t) {
  if (rows.empty() || static_cast<int64_t>(rows.size()) % batch != 0) return {};
  const int64_t per = static_cast<int64_t>(rows.size()) / batch;
  std::vector<int64_t> positions(static_cast<size_t>(per));
  for (int64_t j = 0; j < per; ++j) {
    positions[j] = rows[j];
    if (positions[j] >= t || (j > 0 && positions[j] != positions[j - 1] + 1)) return {};
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < per; ++j)
      if (rows[b * per + j] != b * t + positions[j]) return {};
  return positions;
}

// The first block's input h and its attention's q, k and v on the grid of every vocabulary token at every
// position (V sequences of T copies of one token), (V*T, width) each. Each is a function of its row's token
// and position alone, so a batch's rows are gathered from the grid: row b * t + i of the batch is grid row
// at[b * t + i].
template <typename T>
struct FirstBlockGrid {
  ag::Tensor<T> h, q, k, v;
  std::vector<int64_t> at;
};

template <typename T>
FirstBlockGrid<T> first_block_grid(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t t) {
  const int64_t vocab = model.shape.vocab;
  std::vector<int32_t> grid(static_cast<size_t>(vocab * t));
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t i = 0; i < t; ++i) grid[v * t + i] = static_cast<int32_t>(v);
  FirstBlockGrid<T> out;
  out.at.resize(ids.size());
  for (size_t r = 0; r < ids.size(); ++r)
    out.at[r] = static_cast<int64_t>(ids[r]) * t + static_cast<int64_t>(r) % t;
  const TransformerBlock<T>& block = *model.blocks[0];
  const MultiHeadAttention<T>& a = block.attn;
  out.h = model.embed(grid, vocab, t);
  const ag::Tensor<T> x = attention_input(block, out.h);
  out.q = positioned(a, ag::linear(x, a.wq.weight, a.wq.bias), 0, a.q_norm.get());
  out.k = positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), 0, a.k_norm.get());
  out.v = ag::linear(x, a.wv.weight, a.wv.bias);
  return out;
}

// The grid's four tensors gathered at every row of the batch, (B*T, width) each.
template <typename T>
struct FirstBlockRows {
  ag::Tensor<T> h, q, k, v;
};

}  // namespace

template <typename T>
ag::Tensor<T> training_forward_rows(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                                    int64_t t, const std::vector<int64_t>& rows) {
  const std::vector<ag::Tensor<T>> masks = model.attention_masks(batch, t, {});  // one per block
  const size_t last = model.blocks.size() - 1;
  const int64_t D = model.shape.d_model;
  // (B, len, width): k and v are narrower than D with fewer kv heads than query heads.
  const auto as_batch = [&](const ag::Tensor<T>& r, int64_t len) { return ag::reshape(r, {batch, len, -1}); };
  const TransformerBlock<T>& block = *model.blocks[last];
  const MultiHeadAttention<T>& a = block.attn;
  const std::vector<int64_t> positions = shared_positions(rows, batch, t);
  const int64_t per = static_cast<int64_t>(positions.size());
  // With more sequences than vocabulary tokens (full-batch grokking: 113 tokens, 3,830 sequences) the
  // first block's norm and projections run on the (token, position) grid.
  std::optional<FirstBlockGrid<T>> grid;
  if (model.shape.vocab < batch) grid = first_block_grid(model, ids, t);
  // One block whose scored rows share their positions (grokking): h and q are read on the scored rows
  // only, so they are gathered there alone, each straight in its consumer's shape; k and v at every row.
  // Not for a parallel block: there the embedding's gradient sums in another order than the graph that
  // gathers every row (tests/nn/test_forward_rows.cpp holds this path to that graph's bits).
  if (grid && last == 0 && per > 0 && !block.parallel) {
    std::vector<int64_t> at_rows(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) at_rows[r] = grid->at[static_cast<size_t>(rows[r])];
    const ag::Tensor<T> h_rows = ag::gather_rows(grid->h, at_rows);  // (R, D)
    const ag::Tensor<T> q = ag::gather_rows(grid->q, at_rows, {batch, per, D});
    const ag::Tensor<T> k = ag::gather_rows(grid->k, grid->at, {batch, t, grid->k.size(-1)});
    const ag::Tensor<T> v = ag::gather_rows(grid->v, grid->at, {batch, t, grid->v.size(-1)});
    const ag::Tensor<T> z =
        ag::attention(q, k, v, a.n_heads, ag::select_rows(masks[0], positions), a.score_scale());
    return unembed(model, mlp_residual(block,
                                       ag::linear(ag::reshape(z, {batch * per, D}), a.wo.weight, a.wo.bias,
                                                  /*residual=*/h_rows),
                                       ag::Tensor<T>()));
  }
  // Otherwise the grid's rows are gathered at every row of the batch.
  std::optional<FirstBlockRows<T>> first;
  if (grid)
    first = FirstBlockRows<T>{ag::gather_rows(grid->h, grid->at), ag::gather_rows(grid->q, grid->at),
                              ag::gather_rows(grid->k, grid->at), ag::gather_rows(grid->v, grid->at)};
  ag::Tensor<T> h = first ? as_batch(first->h, t) : model.embed(ids, batch, t);
  const auto block_attention_residual = [&](size_t l) {
    const MultiHeadAttention<T>& al = model.blocks[l]->attn;
    if (l > 0 || !first) return attention_residual(*model.blocks[l], h, masks[l]);
    return ag::linear(ag::attention(as_batch(first->q, t), as_batch(first->k, t), as_batch(first->v, t),
                                    al.n_heads, masks[0], al.score_scale()),
                      al.wo.weight, al.wo.bias, /*residual=*/h);
  };
  for (size_t l = 0; l < last; ++l) h = mlp_residual(*model.blocks[l], block_attention_residual(l), h);

  ag::Tensor<T> resid_mid_rows;  // (R, D): the last block's resid_mid on the scored rows
  if (positions.empty()) {
    resid_mid_rows = ag::select_rows(block_attention_residual(last), rows);
  } else {
    // Every sequence scores the positions P: queries, attention and Wo run there only, (B, |P|, D)
    // queries against all T keys under the causal mask's rows P.
    ag::Tensor<T> q, k, v;
    if (first && last == 0) {  // a parallel block on the grid
      q = as_batch(ag::gather_rows(first->q, rows), per);
      k = as_batch(first->k, t);
      v = as_batch(first->v, t);
    } else {
      const ag::Tensor<T> x = attention_input(block, h);
      q = positioned(a, as_batch(ag::linear(ag::select_rows(x, rows), a.wq.weight, a.wq.bias), per),
                     positions[0], a.q_norm.get());
      k = positioned(a, ag::linear(x, a.wk.weight, a.wk.bias), 0, a.k_norm.get());
      v = ag::linear(x, a.wv.weight, a.wv.bias);
    }
    const ag::Tensor<T> z =
        ag::attention(q, k, v, a.n_heads, ag::select_rows(masks[last], positions), a.score_scale());
    resid_mid_rows = ag::linear(ag::reshape(z, {batch * per, D}), a.wo.weight, a.wo.bias,
                                /*residual=*/ag::select_rows(h, rows));
  }
  // Parallel: the last MLP reads the block input's rows too.
  const ag::Tensor<T> input_rows = block.parallel ? ag::select_rows(h, rows) : ag::Tensor<T>();
  return unembed(model, mlp_residual(block, resid_mid_rows, input_rows));  // (R, V)
}

#define ATTOGRAD_INSTANTIATE(T)                                                                             \
  template ag::Tensor<T> training_forward<T>(const CausalLM<T>&, const std::vector<int32_t>&, int64_t,      \
                                             int64_t, const std::vector<uint8_t>&);                         \
  template ag::Tensor<T> training_forward_rows<T>(const CausalLM<T>&, const std::vector<int32_t>&, int64_t, \
                                                  int64_t, const std::vector<int64_t>&);                    \
  template ag::Tensor<T> attention_input<T>(const TransformerBlock<T>&, const ag::Tensor<T>&);              \
  template ag::Tensor<T> positioned<T>(const MultiHeadAttention<T>&, const ag::Tensor<T>&, int64_t,         \
                                       const RMSNorm<T>*);                                                  \
  template ag::Tensor<T> mlp_residual<T>(const TransformerBlock<T>&, const ag::Tensor<T>&,                  \
                                         const ag::Tensor<T>&);                                             \
  template ag::Tensor<T> soft_cap<T>(const ag::Tensor<T>&, double);                                         \
  template ag::Tensor<T> unembed<T>(const CausalLM<T>&, const ag::Tensor<T>&);
ATTOGRAD_INSTANTIATE(float)
ATTOGRAD_INSTANTIATE(double)
#undef ATTOGRAD_INSTANTIATE

}  // namespace nn
