// Fused multi-head attention: head split + scores + mask + softmax + weighted sum + head merge in one op,
// with its own backward. It computes exactly what nn::scaled_dot_product_attention composes from matmul,
// transpose, scale, masked_fill and softmax (tests/nn/test_fused_attention.cpp checks the two against
// each other and gradchecks this one), without the permute copies and the four (B, H, T, S) intermediates.
//
// Dimension letters: B batch, H heads, T query positions, S key positions, hs head size, D = H * hs.
// q (B, T, D), k and v (B, S, Dkv): head h is columns [h*hs, (h+1)*hs), as Linear outputs lay them out.
// Grouped-query attention: k and v have Hkv = Dkv / hs heads, and query head h reads kv head h / (H / Hkv).
// The weights P (B, H, T, S) are kept for backward when they are small; larger ones are recomputed there
// from q and k (kRecomputeWeightsBytes). Nothing else is kept.
// Also here: rotary, the position rotation (RoPE) a model applies to q and k before attention.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/gemm.h"
#include "autograd/ops.h"
#include "autograd/softmax_row.h"
#include "autograd/threads.h"

namespace ag {

namespace {

// Where the mask row of (b, h, t) starts, for a mask broadcast to (B, H, T, S); col_stride is 0 or 1.
struct MaskIndex {
  std::array<int64_t, 4> stride{0, 0, 0, 0};
  bool defined = false;
  int64_t row(int64_t b, int64_t h, int64_t t) const { return b * stride[0] + h * stride[1] + t * stride[2]; }
};

std::string shapes(const Shape& q, const Shape& k, const Shape& v) {
  return shape_str(q) + ", " + shape_str(k) + ", " + shape_str(v);
}

// Above this many bytes of weights (B, H, T, S) a recorded forward does not keep them: backward
// recomputes each (b, h) block from q and k. Up to it they are kept: recomputing adds Q K^T and the
// softmax to attention's backward, a visible cost where attention is a large part of a step (a sixth at
// the tiny bench config, whose weights take 0.5 MB per layer), for little memory.
constexpr int64_t kRecomputeWeightsBytes = int64_t(4) << 20;

// Query rows are taken this many at a time, each block's products running only over the keys some row
// of the block may attend to (a causal mask's visible prefix): masked scores are never computed and the
// zero weights they would give are never multiplied. 16 rows: at tiny's T 32 the blocks cover 24 of 32
// keys on average, and each product still fills whole 8-row GEMM tiles.
constexpr int64_t kRowBlock = 16;

// Which keys the query rows of one (b, h) pair may see, read from the mask by WeightsInputs::visible:
//   ends[t]       1 + the last key query t may attend to (0 if none);
//   widths[t]     the largest end in t's block of kRowBlock rows. Row t's weights are computed over its
//                 first widths[t] keys (the masked ones among them as -inf, so 0) and are 0 beyond: a
//                 whole block shares one width, so its rows are as long as its products and the softmax
//                 runs on whole vectors, not a scalar tail per row;
//   first_rows[j] for key block j (keys j * kRowBlock on): the first row whose width reaches into it (T if
//                 none). Rows before it have zero weights on those keys, so the products summed over query
//                 rows for them (dv, dk) may start there.
// They depend only on the pair's slab of the mask, `slab` (-1 before the first read).
struct VisibleKeys {
  std::vector<int64_t> ends, widths, first_rows;
  int64_t slab = -1;
  VisibleKeys(int64_t Tq, int64_t S)
      : ends(static_cast<size_t>(Tq)),
        widths(static_cast<size_t>(Tq)),
        first_rows(static_cast<size_t>((S + kRowBlock - 1) / kRowBlock)) {}
};

// r[s] = (mask[s] != 0 ? -inf : r[s] * scale) for s < n, a packet at a time. Written as a scalar loop
// GCC compiled the select to a branch, mispredicted at every row's causal edge: a quarter of attention's
// forward at T 32.
template <typename T>
void scale_and_mask(T* r, const T* mask, int64_t n, T scale) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = ei::packet_traits<T>::size;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const P scale_v = ei::pset1<P>(scale), ninf_v = ei::pset1<P>(ninf), zero = ei::pset1<P>(T(0));
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t s = 0; s < whole; s += kLanes) {
    const P visible = ei::pcmp_eq(ei::ploadu<P>(mask + s), zero);
    ei::pstoreu(r + s, ei::pselect(visible, ei::pmul(ei::ploadu<P>(r + s), scale_v), ninf_v));
  }
  for (int64_t s = whole; s < n; ++s) r[s] = mask[s] != T(0) ? ninf : r[s] * scale;
}

// Everything the weights of one (b, h) pair are computed from.
template <typename T>
struct WeightsInputs {
  const T* q;  // (B, T, D)
  const T* k;  // (B, S, Dkv)
  const T* mask;
  MaskIndex mi;
  int64_t Tq, S, D, H, hs;
  T scale;
  int64_t Dkv, G;  // k's and v's row width, and the query heads per kv head (H / (Dkv / hs))

  // Fills `keys` for pair i, unless they were read from the same slab of the mask by the previous call:
  // a mask broadcast over batch and heads is scanned once per thread.
  void visible(int64_t i, VisibleKeys& keys) const {
    const int64_t b = i / H, h = i % H;
    if (mi.row(b, h, 0) == keys.slab) return;
    keys.slab = mi.row(b, h, 0);
    for (int64_t t = 0; t < Tq; ++t) {
      const T* mr = mi.defined ? mask + mi.row(b, h, t) : nullptr;
      int64_t end = S;
      if (mr && mi.stride[3] == 0)
        end = *mr != T(0) ? 0 : S;
      else if (mr)
        while (end > 0 && mr[end - 1] != T(0)) --end;
      keys.ends[t] = end;
    }
    for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock) {
      const int64_t t1 = std::min(Tq, t0 + kRowBlock);
      std::fill(keys.widths.begin() + t0, keys.widths.begin() + t1,
                *std::max_element(keys.ends.begin() + t0, keys.ends.begin() + t1));
    }
    for (size_t j = 0; j < keys.first_rows.size(); ++j) {
      int64_t t = 0;
      while (t < Tq && keys.widths[t] <= static_cast<int64_t>(j) * kRowBlock) ++t;
      keys.first_rows[j] = t;
    }
  }

  // p (T, S) = softmax(q_h k_h^T * scale, -inf where masked) for pair i = b * H + h, with `keys` from
  // visible.
  void compute(int64_t i, const VisibleKeys& keys, T* p) const {
    const std::vector<int64_t>& widths = keys.widths;
    const int64_t b = i / H, h = i % H;
    const T* qh = q + b * Tq * D + h * hs;                               // (T, hs), rows D apart
    const MatView<T> kh = row_major(k + b * S * Dkv + h / G * hs, Dkv);  // (S, hs)
    // scores = q k^T * scale, as the composed path: the product first, then the scaling.
    for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock) {
      gemm(std::min(kRowBlock, Tq - t0), widths[t0], hs, row_major(qh + t0 * D, D), kh.transposed(),
           p + t0 * S, S, false);
    }
    const T sc = scale, ninf = -std::numeric_limits<T>::infinity();
    for (int64_t t = 0; t < Tq; ++t) {
      T* r = p + t * S;
      const int64_t end = widths[t];
      std::fill(r + end, r + S, T(0));
      if (keys.ends[t] == 0) {  // nowhere to look: all -inf, so zero weights, output and gradient
        std::fill(r, r + end, ninf);
        continue;
      }
      if (mi.defined && mi.stride[3] != 0)
        scale_and_mask(r, mask + mi.row(b, h, t), end, sc);
      else
        VecMap<T>(r, end) *= sc;
    }
    // The weights over the scores, in place, a block of rows (one width) at a time.
    for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock)
      softmax_rows(p + t0 * S, p + t0 * S, std::min(kRowBlock, Tq - t0), widths[t0], S);
  }
};

}  // namespace

template <typename T>
Tensor<T> attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, int64_t n_heads,
                    const Tensor<T>& mask, T scale) {
  if (!q.defined() || !k.defined() || !v.defined())
    throw std::invalid_argument("attention: q, k and v must be defined");
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || k.shape() != v.shape() || q.size(0) != k.size(0) ||
      n_heads < 1 || q.size(2) % n_heads != 0 || q.size(2) / n_heads == 0 ||
      k.size(2) % (q.size(2) / n_heads) != 0 || k.size(2) == 0 ||
      n_heads % (k.size(2) / (q.size(2) / n_heads)) != 0)
    throw std::invalid_argument("attention: q, k, v of shapes " + shapes(q.shape(), k.shape(), v.shape()) +
                                " must be (B, T, D), (B, S, Dkv), (B, S, Dkv) with D = n_heads " +
                                std::to_string(n_heads) + " x hs and Dkv = Hkv x hs, Hkv dividing n_heads");
  const int64_t B = q.size(0), Tq = q.size(1), S = k.size(1), D = q.size(2), H = n_heads, hs = D / H;
  const int64_t Dkv = k.size(2), G = H / (Dkv / hs);

  MaskIndex mi;
  if (mask.defined()) {
    const Shape& ms = mask.shape();
    const std::array<int64_t, 4> full{B, H, Tq, S};
    bool fits = ms.size() <= 4;
    int64_t stride = 1;
    for (size_t i = 0; fits && i < ms.size(); ++i) {
      const size_t md = ms.size() - 1 - i, d = 3 - i;
      if (ms[md] == full[d] && full[d] != 1)
        mi.stride[d] = stride;
      else if (ms[md] != 1)
        fits = false;
      stride *= ms[md];
    }
    if (!fits)
      throw std::invalid_argument("attention: mask of shape " + shape_str(ms) + " does not broadcast to " +
                                  shape_str({B, H, Tq, S}));
    mi.defined = true;
  }

  Tensor<T> out = Tensor<T>::empty({B, Tq, D});
  // The weights are kept for backward when a graph is recorded and they are small (see
  // kRecomputeWeightsBytes); otherwise each thread reuses one (T, S) scratch block.
  const bool record = needs_grad<T>({&q, &k, &v});
  const bool keep = record && B * H * Tq * S * static_cast<int64_t>(sizeof(T)) <= kRecomputeWeightsBytes;
  Buffer<T> weights(keep ? static_cast<size_t>(B * H * Tq * S) : 0);
  const T* pm = mask.defined() ? mask.data() : nullptr;
  const WeightsInputs<T> wi{q.data(), k.data(), pm, mi, Tq, S, D, H, hs, scale, Dkv, G};
  const T* pv = v.data();
  T* po = out.data();
  T* pw = weights.data();
  // One (b, h) pair per task: each pair's numbers are computed whole by one thread, so results do not
  // depend on the thread count.
  parallel_for(B * H, 4 * B * H * Tq * S * hs, [&](int64_t i0, int64_t i1) {
    Buffer<T> block(keep ? 0 : static_cast<size_t>(Tq * S));
    VisibleKeys keys(Tq, S);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / H, h = i % H;
      T* p = keep ? pw + i * Tq * S : block.data();  // (T, S)
      wi.visible(i, keys);
      wi.compute(i, keys, p);
      const MatView<T> vh = row_major(pv + b * S * Dkv + h / G * hs, Dkv);  // (S, hs)
      for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock)
        gemm(std::min(kRowBlock, Tq - t0), hs, keys.widths[t0], row_major<T>(p + t0 * S, S), vh,
             po + (b * Tq + t0) * D + h * hs, D, false);
    }
  });

  if (record)
    // The mask is captured by value (it is no graph input) for recomputing the weights.
    attach(
        out, "attention", {q.node_ptr(), k.node_ptr(), v.node_ptr()},
        [B, Tq, S, D, H, hs, scale, mi, mask, Dkv, G, weights = std::move(weights)](Node<T>& n) {
          Node<T>& nq = *n.inputs[0];
          Node<T>& nk = *n.inputs[1];
          Node<T>& nv = *n.inputs[2];
          // Each (b, h) writes its own slab of dq; the G query heads of one kv head, taken in order by one
          // task, write that kv head's slab of dk and dv (the first assigns or adds as the slab's Grad says,
          // the others add). dv's Grad is acquired first, then dq's, then dk's, so where two of q, k, v are
          // one node the later writes add.
          const detail::Grad<T> dv(nv), dq(nq), dk(nk);
          const T* pq = nq.value.data();
          const T* pk = nk.value.data();
          const T* pv = nv.value.data();
          const T* dout = n.grad.data();
          const bool kept = !weights.empty();
          const T* pm = mask.defined() ? mask.data() : nullptr;
          const WeightsInputs<T> wi{pq, pk, pm, mi, Tq, S, D, H, hs, scale, Dkv, G};
          // One task per (b, kv head): its G query heads in order, so dk and dv sum in a fixed order.
          parallel_for(B * H / G, 8 * B * H * Tq * S * hs, [&](int64_t j0, int64_t j1) {
            Mat<T> dscores(Tq, S);  // scratch, one per thread: first dP, then dscores in place
            Buffer<T> block(kept ? 0 : static_cast<size_t>(Tq * S));
            VisibleKeys keys(Tq, S);
            const std::vector<int64_t>& widths = keys.widths;
            for (int64_t i = j0 * G; i < j1 * G; ++i) {
              const int64_t b = i / H, h = i % H, kv = h / G;
              const bool first = h % G == 0;  // the kv head's first query head: dk and dv as their Grad says
              const T* qh = pq + b * Tq * D + h * hs;
              const T* kh = pk + b * S * Dkv + kv * hs;
              const T* vh = pv + b * S * Dkv + kv * hs;
              const T* douth = dout + b * Tq * D + h * hs;
              wi.visible(i, keys);
              if (!kept) wi.compute(i, keys, block.data());  // as forward did
              const T* p = kept ? weights.data() + i * Tq * S : block.data();
              // out = P v  =>  dv = P^T dout. Key rows s0.. of dv sum over the query rows that see them.
              if (dv)
                for (int64_t s0 = 0; s0 < S; s0 += kRowBlock) {
                  const int64_t t0 = keys.first_rows[s0 / kRowBlock];
                  gemm(std::min(kRowBlock, S - s0), hs, Tq - t0, row_major(p + t0 * S + s0, S).transposed(),
                       row_major(douth + t0 * D, D), dv.data() + (b * S + s0) * Dkv + kv * hs, Dkv,
                       dv.adds() || !first);
                }
              if (!dq && !dk) continue;
              // dP = dout v^T, on the visible keys only.
              for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock)
                gemm(std::min(kRowBlock, Tq - t0), widths[t0], hs, row_major(douth + t0 * D, D),
                     row_major(vh, Dkv).transposed(), dscores.data() + t0 * S, S, false);
              // P = softmax(scores): dscores = P * (dP - <dP, P>) per row; then the scale. A masked
              // entry has P = 0, so it passes no gradient; entries past a row's visible keys are set to 0
              // for the products below.
              for (int64_t t = 0; t < Tq; ++t) {
                const int64_t end = widths[t];
                T* dsr = dscores.data() + t * S;
                std::fill(dsr + end, dsr + S, T(0));
                const ConstVecMap<T> pr(p + t * S, end);
                VecMap<T> ds(dsr, end);
                const T dot = (pr * ds).sum();
                ds = pr * (ds - dot) * scale;
              }
              // scores = q k^T  =>  dq = dscores k,  dk = dscores^T q
              if (dq)
                for (int64_t t0 = 0; t0 < Tq; t0 += kRowBlock)
                  gemm(std::min(kRowBlock, Tq - t0), hs, widths[t0], row_major<T>(dscores.data() + t0 * S, S),
                       row_major(kh, Dkv), dq.data() + (b * Tq + t0) * D + h * hs, D, dq.adds());
              if (dk)
                for (int64_t s0 = 0; s0 < S; s0 += kRowBlock) {
                  const int64_t t0 = keys.first_rows[s0 / kRowBlock];
                  gemm(std::min(kRowBlock, S - s0), hs, Tq - t0,
                       row_major<T>(dscores.data() + t0 * S + s0, S).transposed(), row_major(qh + t0 * D, D),
                       dk.data() + (b * S + s0) * Dkv + kv * hs, Dkv, dk.adds() || !first);
                }
            }
          });
        });
  return out;
}

double rotary_angle(int64_t position, int64_t pair, int64_t rotary_dims, double base) {
  return static_cast<double>(position) *
         std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(rotary_dims));
}

namespace {
// out's head = x's head with its first 2 * half values turned by the angles whose cos and sin are c and s
// (half each): (x1, x2) -> (x1 c - x2 s, x2 c + x1 s), sign = +1; sign = -1 turns back (the backward). The
// values past 2 * half are copied.
template <typename T>
void rotate_head(const T* x, T* out, const T* c, const T* s, int64_t half, int64_t head_dim, T sign) {
  for (int64_t i = 0; i < half; ++i) {
    const T x1 = x[i], x2 = x[i + half];
    out[i] = x1 * c[i] - sign * x2 * s[i];
    out[i + half] = x2 * c[i] + sign * x1 * s[i];
  }
  std::copy(x + 2 * half, x + head_dim, out + 2 * half);
}
}  // namespace

template <typename T>
Tensor<T> rotary(const Tensor<T>& x, int64_t head_dim, int64_t rotary_dims, double base,
                 int64_t first_position) {
  if (!x.defined()) throw std::invalid_argument("rotary: x must be defined");
  if (x.dim() < 3)
    throw std::invalid_argument("rotary: x of shape " + shape_str(x.shape()) + " is not (B, T, heads...)");
  if (head_dim < 1 || rotary_dims < 2 || rotary_dims % 2 != 0 || rotary_dims > head_dim)
    throw std::invalid_argument("rotary: rotary_dims " + std::to_string(rotary_dims) +
                                " must be even, >= 2 and <= head_dim " + std::to_string(head_dim));
  if (!(base > 0)) throw std::invalid_argument("rotary: base must be positive, got " + std::to_string(base));
  if (first_position < 0)
    throw std::invalid_argument("rotary: first_position " + std::to_string(first_position) + " < 0");
  const int64_t B = x.size(0), Tn = x.size(1);
  const int64_t row = B * Tn == 0 ? 0 : x.numel() / (B * Tn);  // the values of one (b, t)
  if (row % head_dim != 0)
    throw std::invalid_argument("rotary: x of shape " + shape_str(x.shape()) + " has " + std::to_string(row) +
                                " values per position, not whole heads of " + std::to_string(head_dim));
  const int64_t heads = row / head_dim, half = rotary_dims / 2;
  // cos and sin per position and pair, (T, half) each, from the angles in double.
  std::vector<T> cs(static_cast<size_t>(2 * Tn * half));
  T* c = cs.data();
  T* sn = cs.data() + Tn * half;
  for (int64_t t = 0; t < Tn; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = rotary_angle(first_position + t, i, rotary_dims, base);
      c[t * half + i] = static_cast<T>(std::cos(a));
      sn[t * half + i] = static_cast<T>(std::sin(a));
    }
  Tensor<T> out = Tensor<T>::empty(x.shape());
  const T* xp = x.data();
  T* yp = out.data();
  parallel_for(B * Tn, 3 * B * Tn * row, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % Tn;
      for (int64_t h = 0; h < heads; ++h)
        rotate_head(xp + r * row + h * head_dim, yp + r * row + h * head_dim, c + t * half, sn + t * half,
                    half, head_dim, T(1));
    }
  });
  if (needs_grad<T>({&x}))
    attach(out, "rotary", {x.node_ptr()},
           [cs = std::move(cs), B, Tn, row, heads, half, head_dim](Node<T>& n) {
             const detail::Grad<T> dx(*n.inputs[0]);
             if (!dx) return;
             const T* c = cs.data();
             const T* sn = cs.data() + Tn * half;
             const T* dy = n.grad.data();
             T* dxp = dx.data();
             const bool adds = dx.adds();
             parallel_for(B * Tn, 3 * B * Tn * row, [&](int64_t r0, int64_t r1) {
               std::vector<T> turned(static_cast<size_t>(adds ? head_dim : 0));
               for (int64_t r = r0; r < r1; ++r) {
                 const int64_t t = r % Tn;
                 for (int64_t h = 0; h < heads; ++h) {
                   const int64_t at = r * row + h * head_dim;
                   if (!adds) {
                     rotate_head(dy + at, dxp + at, c + t * half, sn + t * half, half, head_dim, T(-1));
                   } else {
                     rotate_head(dy + at, turned.data(), c + t * half, sn + t * half, half, head_dim, T(-1));
                     VecMap<T>(dxp + at, head_dim) += ConstVecMap<T>(turned.data(), head_dim);
                   }
                 }
               }
             });
           });
  return out;
}

template Tensor<float> rotary<float>(const Tensor<float>&, int64_t, int64_t, double, int64_t);
template Tensor<double> rotary<double>(const Tensor<double>&, int64_t, int64_t, double, int64_t);

template Tensor<float> attention<float>(const Tensor<float>&, const Tensor<float>&, const Tensor<float>&,
                                        int64_t, const Tensor<float>&, float);
template Tensor<double> attention<double>(const Tensor<double>&, const Tensor<double>&, const Tensor<double>&,
                                          int64_t, const Tensor<double>&, double);

}  // namespace ag
