// The training forward: CausalLM's function (nn/transformer.h) with every fusion the training path uses
// and no hook points. It is what CausalLM::forward runs when given no Hooks; the reference forward (the
// modules' forwards) states the math, and tests/nn/test_hooks.cpp holds the two equal (logits and every
// gradient, to float rounding). Each norm's fused ops are its own (nn::Norm's forward_fused and
// forward_linear). Its fusions:
//   - ln1 is one op (LayerNorm: ag::layer_norm) feeding the three projections;
//   - attention is one op (ag::attention): no (B, H, T, S) scores tensor, no head split or merge copies;
//   - the residual adds happen inside Wo's and fc2's products (ag::linear, ag::gelu_linear with a
//     residual), so their outputs are never tensors of their own;
//   - ln2 with fc1 and ln_f with lm_head are one op each (LayerNorm: ag::layer_norm_linear): the norm's
//     output is recomputed in backward instead of kept;
//   - GELU with fc2 is one op (ag::gelu_linear): GELU's output is never kept;
//   - rotary positions turn q and k with one op each (ag::rotary) between their products and attention.
// With the norm kind none each norm is the identity and those products are plain ag::linear; with RMSNorm
// each norm is ag::rms_norm before a plain product. With ReLU or ReLU^2, fc2 reads the activation's output;
// a gated MLP (SwiGLU, GEGLU) computes ln2 once, the gate and fc1 as two products, and fc2 reads
// act(gate) * fc1's output.
#pragma once

#include "nn/transformer.h"

namespace nn {

// ids (B*T, row-major) -> logits (B, T, vocab); is_padding as CausalLM::forward.
template <typename T>
ag::Tensor<T> training_forward(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                               int64_t t, const std::vector<uint8_t>& is_padding);

// The same forward for a loss that reads only some rows: the logits (R, V) of the flat rows b * T + t in
// `rows` (strictly increasing), with no padding. Work that no scored row reads is left out:
//   - the last block's MLP and the unembedding run on those rows only;
//   - when every sequence scores the same contiguous positions P, the last block's queries, attention and
//     Wo run at P only too (its keys and values at every position);
//   - when the batch has more sequences than the vocabulary has tokens, the first block's input, norm and
//     q, k, v projections (functions of a row's token and position alone) run once on the grid of every
//     token at every position and are gathered per row (ag::gather_rows, whose backward sums them back);
//     with one (not parallel) block and shared positions, h and q are gathered at the scored rows only.
// The same values as training_forward's rows up to float rounding (weight gradients sum their rows in
// another order; tests/nn/test_forward_rows.cpp), at a fraction of the cost when few positions are scored.
template <typename T>
ag::Tensor<T> training_forward_rows(const CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t batch,
                                    int64_t t, const std::vector<int64_t>& rows);

// The fused pieces that the training forward and CausalLM::forward_cached share.
// ln1(h), attention's input (h itself with the norm kind none).
template <typename T>
ag::Tensor<T> attention_input(const TransformerBlock<T>& block, const ag::Tensor<T>& h);
// resid_mid + mlp(ln2(resid_mid)): the block's second half (resid_mid itself when attention_only); a
// parallel block's MLP reads ln2(block_input) instead (block_input, the block's resid_pre, is read only
// then).
template <typename T>
ag::Tensor<T> mlp_residual(const TransformerBlock<T>& block, const ag::Tensor<T>& resid_mid,
                           const ag::Tensor<T>& block_input);
// c * tanh(logits / c) for a cap c > 0 (model.logit_softcap); the logits themselves for 0.
template <typename T>
ag::Tensor<T> soft_cap(const ag::Tensor<T>& logits, double cap);
// A Linear's q or k output (B, T, D) at positions first_position .. first_position + T - 1 as attention
// reads it: each head normalised by `norm` (the attention's q_norm or k_norm, ag::rms_norm) when given, then
// turned by the positions when the attention has rotary positions (ag::rotary); else y itself.
template <typename T>
ag::Tensor<T> positioned(const MultiHeadAttention<T>& attn, const ag::Tensor<T>& y,
                         int64_t first_position = 0, const RMSNorm<T>* norm = nullptr);
// lm_head(ln_f(h)), soft-capped: the logits.
template <typename T>
ag::Tensor<T> unembed(const CausalLM<T>& model, const ag::Tensor<T>& h);

}  // namespace nn
