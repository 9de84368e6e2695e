// Every differentiable op of attograd. Each op's forward and backward sit side by side in one of the
// ops_*.cpp files named below, and each has a float64 gradient-check test in tests/autograd/.
//
// How to add an op (from outside the repo too: include this header and write the same in your namespace):
//   1. Declare it here, in the group it belongs to.
//   2. In its ops_*.cpp file: check shapes (throw std::invalid_argument naming the op and the shapes),
//      compute the output through Eigen maps over the contiguous buffers (products through ag::gemm,
//      gemm.h; large loops through parallel_for, threads.h), and attach the backward. For y = x^2:
//        template <typename T>
//        Tensor<T> square(const Tensor<T>& x) {
//          Tensor<T> y = Tensor<T>::empty(x.shape());
//          y.vec() = x.vec().square();
//          if (needs_grad<T>({&x}))
//            attach(y, "square", {x.node_ptr()}, [](Node<T>& n) {  // n is y's node, n.grad is dy
//              const detail::Grad<T> dx(*n.inputs[0]);            // empty if x needs no gradient
//              if (!dx) return;
//              ConstVecMap<T> xv(n.inputs[0]->value.data(), n.numel()), dy(n.grad.data(), n.numel());
//              dx.put(0, n.numel(), T(2) * xv * dy);              // = into a fresh buffer, else +=
//            });
//          return y;
//        }
//      Write every input's gradient through a detail::Grad (tensor.h) named d + the input's name, never
//      into the buffer by hand. Put each element once (dx.zero(offset, len) where no gradient flows;
//      a kernel with an accumulate flag takes dx.data() and dx.adds()), or, if several contributions
//      sum into one element (broadcast, scatter), construct it with detail::GradWrites::kSum. Acquire the
//      Grads in the order they are written (two inputs may be one node). Capture what backward needs by
//      value, never the output tensor itself (a reference cycle); read inputs as n.inputs[i]->value.
//   3. Instantiate it for float and double at the bottom of the file.
//   4. Add a float64 gradcheck test (tests/autograd/, ag::gradcheck in gradcheck.h) and, where a known
//      number exists, a forward test.
#pragma once

#include <vector>

#include "autograd/tensor.h"

namespace ag {

// ---- Elementwise, with NumPy broadcasting (ops_elementwise.cpp) ----
template <typename T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b);
template <typename T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b);
template <typename T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b);
template <typename T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b);
template <typename T>
Tensor<T> scale(const Tensor<T>& a, T s);  // a * s
template <typename T>
Tensor<T> add_scalar(const Tensor<T>& a, T s);  // a + s
template <typename T>
Tensor<T> neg(const Tensor<T>& a);
// The broadcast shape of a and b, or an exception naming `op` and both shapes.
Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);

// ---- Unary functions (ops_unary.cpp) ----
template <typename T>
Tensor<T> exp(const Tensor<T>& a);
template <typename T>
Tensor<T> log(const Tensor<T>& a);
// 1 / sqrt(a): a LayerNorm's scale, 1 / sqrt(var + eps).
template <typename T>
Tensor<T> rsqrt(const Tensor<T>& a);
template <typename T>
Tensor<T> sqrt(const Tensor<T>& a);
// a^p elementwise for a scalar exponent p (NaN where a < 0 and p is not an integer, as std::pow).
template <typename T>
Tensor<T> pow(const Tensor<T>& a, T p);
template <typename T>
Tensor<T> tanh(const Tensor<T>& a);
template <typename T>
Tensor<T> relu(const Tensor<T>& a);
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as torch's approximate="tanh".
template <typename T>
Tensor<T> gelu(const Tensor<T>& a);
// GELU, exact: 0.5 x (1 + erf(x / sqrt(2))), as torch's F.gelu (GPT-NeoX/Pythia's and nanoGPT's "gelu").
template <typename T>
Tensor<T> gelu_erf(const Tensor<T>& a);
// SiLU (swish): x * sigmoid(x), as torch's F.silu; SwiGLU's gate.
template <typename T>
Tensor<T> silu(const Tensor<T>& a);

// ---- Matrix products (ops_matmul.cpp; the fused gelu_linear and layer_norm_linear in ops_linear_fused.cpp)
// ---- a (..., M, K) x b (..., K, N) -> (..., M, N). b may be 2-d (K, N): then a's leading dims are flattened
// into one GEMM (the Linear case). Otherwise both have the same leading dims and each is one GEMM.
template <typename T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b);
// x (..., in) times weight (out, in) transposed, plus bias (out) if defined: PyTorch's F.linear, without
// materialising the transpose. With `residual` (the output's shape) defined, returns residual + linear(x,
// weight, bias) in one op: the output starts as residual + bias and the product adds to it, so the
// projection's output is never a tensor of its own (a transformer's residual stream), and the residual's
// gradient is the output's.
template <typename T>
Tensor<T> linear(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                 const Tensor<T>& residual = Tensor<T>());
// linear(gelu(h), weight, bias, residual), the second half of a transformer's MLP, without storing
// gelu(h): forward computes it a block of rows at a time, backward recomputes it (ops_linear_fused.cpp).
// The graph keeps h, the weight, the bias and the residual. Same numbers as the composed ops.
template <typename T>
Tensor<T> gelu_linear(const Tensor<T>& h, const Tensor<T>& weight, const Tensor<T>& bias,
                      const Tensor<T>& residual = Tensor<T>());
// linear(layer_norm(x, ln_weight, ln_bias, eps), weight, bias) without storing the LayerNorm's output:
// computed a block of rows at a time in forward and recomputed in backward from each row's saved mean
// and 1/std (ops_linear_fused.cpp). The graph keeps x and the parameters. Same numbers as the composed ops.
template <typename T>
Tensor<T> layer_norm_linear(const Tensor<T>& x, const Tensor<T>& ln_weight, const Tensor<T>& ln_bias,
                            const Tensor<T>& weight, const Tensor<T>& bias, T eps = T(1e-5));

// ---- Shape ops (ops_shape.cpp) ----
// Swaps the last two dims (a copy: every tensor stays contiguous).
template <typename T>
Tensor<T> transpose(const Tensor<T>& a);
// Same values, new shape; one dim may be -1.
template <typename T>
Tensor<T> reshape(const Tensor<T>& a, Shape shape);
// out.shape[i] = a.shape[perm[i]].
template <typename T>
Tensor<T> permute(const Tensor<T>& a, const std::vector<int64_t>& perm);
template <typename T>
Tensor<T> concat(const std::vector<Tensor<T>>& parts, int64_t dim);
// a (..., D) seen as its N rows of D -> (R, D): rows[i] of a, for strictly increasing rows in [0, N)
// (ops_shape.cpp). Backward: each picked row's gradient back to its row, zero for the others.
template <typename T>
Tensor<T> select_rows(const Tensor<T>& a, const std::vector<int64_t>& rows);
// a (..., D) seen as its N rows of D -> (R, D): rows[i] of a, for any rows in [0, N), repeats allowed
// (ops_shape.cpp). Backward scatter-adds each row's gradient to its source row, in order.
template <typename T>
Tensor<T> gather_rows(const Tensor<T>& a, const std::vector<int64_t>& rows);
// The same rows written straight in `shape` (its last dimension a's, its elements R x D): a gather into
// its consumer's shape, (B, T, D) for attention, with no reshape after it.
template <typename T>
Tensor<T> gather_rows(const Tensor<T>& a, const std::vector<int64_t>& rows, const Shape& shape);
// out (shape `shape`) with out.flat[i] = a.flat[index[i]]: any NumPy indexing of a, as flat positions
// (python/engine.cpp computes them with NumPy). Backward scatter-adds, so a repeated index sums.
template <typename T>
Tensor<T> take(const Tensor<T>& a, const std::vector<int64_t>& index, const Shape& shape);
template <typename T>
std::vector<Tensor<T>> split(const Tensor<T>& a, const std::vector<int64_t>& sizes, int64_t dim);

// ---- Reductions (ops_reduce.cpp) ----
template <typename T>
Tensor<T> sum(const Tensor<T>& a);  // all elements -> shape []
template <typename T>
Tensor<T> sum(const Tensor<T>& a, int64_t dim, bool keepdim = false);
template <typename T>
Tensor<T> mean(const Tensor<T>& a);
template <typename T>
Tensor<T> mean(const Tensor<T>& a, int64_t dim, bool keepdim = false);

// ---- Softmax family and masks (ops_softmax.cpp) ----
// Along the last dim, max-shifted. A row whose entries are all -inf gives zeros (and zero gradient).
template <typename T>
Tensor<T> softmax(const Tensor<T>& a);
template <typename T>
Tensor<T> log_softmax(const Tensor<T>& a);
// Where mask (broadcast to a's shape; nonzero = masked) is set, the output is `value`; elsewhere a.
// No gradient flows to masked positions. Use value = -infinity before softmax.
template <typename T>
Tensor<T> masked_fill(const Tensor<T>& a, const Tensor<T>& mask, T value);
// Mean negative log-likelihood of targets under softmax(logits) over the rows whose target is not
// `ignore_index`: logits (..., V), targets one int per row. Fused log-softmax + NLL.
template <typename T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const std::vector<int32_t>& targets,
                        int32_t ignore_index = -1);

// ---- Attention (ops_attention.cpp) ----
// Fused multi-head attention on Linear outputs: q (B, T, D), k and v (B, S, Dkv), D = n_heads * dk, head h
// in columns [h*dk, (h+1)*dk). Per batch entry and head: softmax(q_h k_g^T * scale, -inf where mask is
// nonzero) v_g with g = h / (n_heads / Hkv), Hkv = Dkv / dk kv heads (grouped-query attention; Dkv = D:
// g = h); the heads' outputs concatenated back to (B, T, D). mask: undefined, or broadcastable to
// (B, H, T, S) (e.g. causal (T, S), padding (B, 1, 1, S)). A fully masked row gives zeros (and no
// gradient), as softmax does. Same numbers as the composed path (split heads, matmul, scale, masked_fill,
// softmax, matmul, merge heads), without its intermediates; the weights are kept for backward only, and
// only up to 4 MB: larger ones are recomputed there from q and k.
template <typename T>
Tensor<T> attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, int64_t n_heads,
                    const Tensor<T>& mask, T scale);
// Rotary position embedding (RoPE) in GPT-NeoX's "rotate_half" layout (Llama's and Hugging Face's), on x
// (B, T, ...) whose values per (b, t) are heads of head_dim values side by side ((B, T, H * head_dim) or
// (B, T, H, head_dim)). In each head the first rotary_dims values (even) are pairs (x1, x2) = (x[i],
// x[i + rotary_dims / 2]), i < rotary_dims / 2, which become (x1 cos a - x2 sin a, x2 cos a + x1 sin a)
// with a = rotary_angle(first_position + t, i, rotary_dims, base); the other values pass through. The
// backward turns the gradient back by -a (ops_attention.cpp).
template <typename T>
Tensor<T> rotary(const Tensor<T>& x, int64_t head_dim, int64_t rotary_dims, double base,
                 int64_t first_position = 0);
// Pair i's angle at position p: p * base^(-2i / rotary_dims), in double whatever the model's type.
double rotary_angle(int64_t position, int64_t pair, int64_t rotary_dims, double base);

// ---- Normalisation and lookup (ops_norm.cpp, ops_embedding.cpp) ----
// Over the last dim: (x - mean) / sqrt(var + eps) * weight + bias, biased variance as PyTorch. Fused
// backward.
template <typename T>
Tensor<T> layer_norm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias, T eps = T(1e-5));
// Over the last dim: x / sqrt(mean(x^2) + eps) * weight, as torch.nn.functional.rms_norm with weight (D).
// Fused backward.
template <typename T>
Tensor<T> rms_norm(const Tensor<T>& x, const Tensor<T>& weight, T eps = T(1e-5));
// Rows of weight (V, D) picked by ids -> shape ids_shape + [D]. Backward scatter-adds into weight.
template <typename T>
Tensor<T> embedding(const Tensor<T>& weight, const std::vector<int32_t>& ids, const Shape& ids_shape);

// ---- Sparse products (ops_sparse.cpp): behind a ReLU or TopK most entries are 0, and these ops cost what
// ---- the nonzero ones cost (a sparse autoencoder trains through them, dictionary/sae.h) ----
// relu of each row's k largest entries of pre (N, M), the rest 0 (ties: the lower index is kept): the TopK
// activation as one op; its gradient flows to the kept positive entries only.
template <typename T>
Tensor<T> topk_relu(const Tensor<T>& pre, int k);

// relu(pre) W (N, D) for pre (N, M) and W (M, D), an op of its own (forward and backward in
// ops_sparse.cpp) because relu(pre) is sparse: the forward adds only the active rows of W, and the backward
// computes d pre only where pre > 0 (dy . W_j) and d W_j only from the tokens where feature j is active,
// so the decoder costs N x L0 x D instead of N x M x D per product.
template <typename T>
Tensor<T> relu_decode(const Tensor<T>& pre, const Tensor<T>& W);

// (x - c) W + b (N, M) for x (N, D), c (D), W (D, M), b (M): the encoder's product, an op of its own whose
// backward reads the gradient as sparse: behind a ReLU or TopK most of d((x - c) W + b) is zero, so dx and
// dW take N x L0 x D instead of N x M x D (a dense product when more than a tenth of it is nonzero), and
// dc = -W db costs D x M whatever N (dx is not formed unless x needs it).
template <typename T>
Tensor<T> sparse_grad_linear(const Tensor<T>& x, const Tensor<T>& c, const Tensor<T>& W, const Tensor<T>& b);

// ---- Dictionary activations (ops_dictionary.cpp): the ones SAELens trains beside ReLU and TopK ----
// f = pre * (pre > threshold) for pre (N, M) and threshold (M) (SAELens's JumpReLU). d pre = dy where
// pre > threshold, 0 elsewhere; d threshold_j = sum_n -(threshold_j / bandwidth) K((pre_nj - threshold_j) /
// bandwidth) dy_nj, with K the rectangle kernel (1 on (-1/2, 1/2), 0 elsewhere): a straight-through
// pseudo-derivative, which no finite difference gives.
template <typename T>
Tensor<T> jumprelu(const Tensor<T>& pre, const Tensor<T>& threshold, T bandwidth);
// H = (pre > threshold) as 0 or 1 (SAELens's Step: its sum over features is L0). d pre = 0; d threshold_j =
// sum_n -(1 / bandwidth) K((pre_nj - threshold_j) / bandwidth) dy_nj.
template <typename T>
Tensor<T> jumprelu_step(const Tensor<T>& pre, const Tensor<T>& threshold, T bandwidth);
// relu(pre) for pre (N, M) with only the `keep` largest entries of the whole batch kept, the rest 0 (ties:
// the lower flat index); the gradient flows to the kept positive entries (SAELens's BatchTopK, keep = k N).
template <typename T>
Tensor<T> batch_topk_relu(const Tensor<T>& pre, int64_t keep);

// Operators for readable model code.
template <typename T>
Tensor<T> operator+(const Tensor<T>& a, const Tensor<T>& b) {
  return add(a, b);
}
template <typename T>
Tensor<T> operator-(const Tensor<T>& a, const Tensor<T>& b) {
  return sub(a, b);
}
template <typename T>
Tensor<T> operator*(const Tensor<T>& a, const Tensor<T>& b) {
  return mul(a, b);
}
template <typename T>
Tensor<T> operator/(const Tensor<T>& a, const Tensor<T>& b) {
  return div(a, b);
}
template <typename T>
Tensor<T> operator-(const Tensor<T>& a) {
  return neg(a);
}

}  // namespace ag
