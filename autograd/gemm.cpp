// The packed GEMM behind ag::gemm (see gemm.h). Blocked as in GotoBLAS/BLIS:
//   for each kKC-deep slice of the inner dimension:  pack B's slice (kc x cols) into slivers kNR wide
//     for each kMC-row block of A:                   (stays in L2)
//       for each pair of slivers:                    micro-kernel: a kMR x kNR tile of C in registers
// The micro-kernel keeps its kMR x kNR accumulators in vector registers for the whole kc loop, streams
// the packed B sliver (contiguous in exactly the order it is consumed) and broadcasts A's elements read
// in place; only a sliver cut by the last row (or an A with no unit stride) is copied, zero-padded.
// It is written with GCC/Clang vector extensions, so one source compiles to AVX-512, AVX2, SSE or, on
// aarch64, NEON code (16-byte vectors, fmla; gemm_vector_isa says which); the tile is sized so the
// accumulators fill the machine's vector registers without spilling (on aarch64, 12 of its 32).
#include "autograd/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "autograd/tensor.h"
#include "autograd/threads.h"

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace ag {

namespace {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
// 8 x 2 accumulators + 2 B vectors + 1 broadcast of the 32 registers. 12 rows fill more of them, but
// 8 divides the sequence lengths and widths these models use, so no tile is cut by an edge, and the cut
// tiles of 12 rows cost more than their extra rows gain.
constexpr int kMR = 8;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
constexpr int kMR = 6;  // 6 x 2 accumulators + 3 of the 16 registers
#else
constexpr int kVectorBytes = 16;
constexpr int kMR = 6;
#endif

// acc + a * b, lane by lane, rounded once (a fused multiply-add) wherever the CPU has one for the vector's
// width. Every product of the micro-kernel and of gemm_row goes through it, so that two paths that sum the
// same terms in the same order give the same bits. Left to the compiler, `acc += a * b` is contracted into
// an FMA in some loops and not in others: GCC tuned for Zen 2/3 keeps a loop-carried chain of 256-bit
// multiply-adds uncontracted (X86_TUNE_AVOID_256FMA_CHAINS), which split gemm_row's narrow path from the
// kernel's on AVX2; and what is contracted also differs between compilers and optimisation levels.
template <typename V, typename T>
inline V fused_madd(V acc, T a, V b) {
  [[maybe_unused]] constexpr bool f32 = std::is_same<T, float>::value;
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {
    if constexpr (f32)
      return reinterpret_cast<V>(
          _mm512_fmadd_ps(_mm512_set1_ps(a), reinterpret_cast<__m512>(b), reinterpret_cast<__m512>(acc)));
    else
      return reinterpret_cast<V>(
          _mm512_fmadd_pd(_mm512_set1_pd(a), reinterpret_cast<__m512d>(b), reinterpret_cast<__m512d>(acc)));
  }
#endif
#if defined(__FMA__)
  if constexpr (sizeof(V) == 32) {
    if constexpr (f32)
      return reinterpret_cast<V>(
          _mm256_fmadd_ps(_mm256_set1_ps(a), reinterpret_cast<__m256>(b), reinterpret_cast<__m256>(acc)));
    else
      return reinterpret_cast<V>(
          _mm256_fmadd_pd(_mm256_set1_pd(a), reinterpret_cast<__m256d>(b), reinterpret_cast<__m256d>(acc)));
  }
  if constexpr (sizeof(V) == 16) {
    if constexpr (f32)
      return reinterpret_cast<V>(
          _mm_fmadd_ps(_mm_set1_ps(a), reinterpret_cast<__m128>(b), reinterpret_cast<__m128>(acc)));
    else
      return reinterpret_cast<V>(
          _mm_fmadd_pd(_mm_set1_pd(a), reinterpret_cast<__m128d>(b), reinterpret_cast<__m128d>(acc)));
  }
#elif defined(__aarch64__)
  if constexpr (sizeof(V) == 16) {
    if constexpr (f32)
      return reinterpret_cast<V>(
          vfmaq_n_f32(reinterpret_cast<float32x4_t>(acc), reinterpret_cast<float32x4_t>(b), a));
    else
      return reinterpret_cast<V>(
          vfmaq_n_f64(reinterpret_cast<float64x2_t>(acc), reinterpret_cast<float64x2_t>(b), a));
  }
#endif
  return acc + a * b;  // no fused multiply-add for this width: nothing to contract it into either
}

// The vector at p, which need not be aligned: one unaligned vector load. Not a memcpy: into an array
// element it may become two half-width moves, which the transpose's full-width reads then wait on; and
// ASan turns every memcpy into a call that checks its range, a call per vector in the micro-kernel.
template <typename V, typename T>
V load(const T* p) {
  typedef V Unaligned __attribute__((aligned(alignof(T)), may_alias));
  return *reinterpret_cast<const Unaligned*>(p);
}

// v stored at p, which need not be aligned (as load).
template <typename V, typename T>
void store(T* p, V v) {
  typedef V Unaligned __attribute__((aligned(alignof(T)), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}

// Depth of a packed slice and rows of an A block: a kc x kNR sliver of B and a kMC x kc block of A stay
// in L1/L2 while the micro-kernel runs over them (sized for a 1 MB L2; the rate changes little across
// kKC 128 to 768 and kMC 48 to 144, so neither is a sharp optimum).
constexpr int64_t kKC = kGemmSliceDepth;
constexpr int64_t kMC = 48;
constexpr int64_t kNC = 2048;  // columns of B packed at once, bounding the packed buffer (4 MB float32)

// Below this many flops a product runs whole on the calling thread: too little work to repay waking the pool.
constexpr int64_t kParallelFlops = int64_t(1) << 21;
// The same for a product of one row (a decoding step), which reads each element of B once: it is bound by
// reading B, which takes several times as long as the arithmetic, from memory (B of 512 KB in float32).
constexpr int64_t kParallelRowFlops = int64_t(1) << 18;
// Parts per thread of a split product, and the least work in one part (enough that claiming a part costs
// little beside it).
constexpr int64_t kPartsPerThread = 4;
constexpr int64_t kMinPartFlops = int64_t(1) << 19;

// The most parts a split product of `flops` takes: kPartsPerThread a thread, each at least kMinPartFlops,
// and at least 2. Claimed first come first served by the pool, so a thread whose core is shared with
// another process takes fewer of them instead of holding the others up.
inline int64_t split_parts(int64_t flops, int64_t threads) {
  return std::max<int64_t>(2, std::min(kPartsPerThread * threads, flops / kMinPartFlops));
}

// f(u0, u1) over consecutive ranges of [0, units) covering it: one range on the calling thread when
// `serial`, else min(units, split_parts) ranges over the pool. Each unit is a block of C computed the same
// way whatever range holds it, so the split leaves the bits as they are.
template <typename F>
void split_units(int64_t units, int64_t flops, bool serial, F&& f) {
  if (serial) return f(int64_t(0), units);
  const int64_t parts = std::min(units, split_parts(flops, num_threads()));
  parallel_for(parts, flops, [&](int64_t p0, int64_t p1) { f(units * p0 / parts, units * p1 / parts); });
}

// Largest B read in place rather than packed (see read_b_in_place).
constexpr int64_t kInPlaceBBytes = 64 * 1024;
// An A larger than this (a core's L2) makes a column split give each part at least kLargeAMinCols
// columns of C: every part streams all of A from memory once per slice, so a large A (medium's fc1
// weight gradient, dY^T X with A 2048 x 2048 and 512 columns) runs faster in a few wide parts than in
// many narrow ones, at any vector width.
constexpr int64_t kLargeABytes = 1 << 20;
constexpr int64_t kLargeAMinCols = 256;
// A packed B at most this large is cheap enough to pack again in every part of a row split (see gemm):
// it lets tiny's fc2 and its fc1 input gradient (1024 x 64 x 256, B 64 KB) split by rows, so the rows a
// part writes are the rows its thread wrote before, still in that core's cache.
constexpr int64_t kSmallBBytes = 64 * 1024;
// A C with at most this many elements and an inner dimension of several slices (a weight's gradient,
// dY^T X over many tokens, at tiny and small widths) is split by slices of the inner dimension instead.
constexpr int64_t kSliceSplitMaxC = 64 * 1024;

// c[rows x cols] = its start (see CStart): residual + bias, as the op computing it alone would.
template <typename T>
void write_start(CStart<T> start, int64_t rows, int64_t cols, T* c, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) {
    T* ci = c + i * ldc;
    const T* ri = start.residual ? start.residual + i * start.ld : nullptr;
    if (!ri)
      std::copy(start.bias, start.bias + cols, ci);
    else if (!start.bias)
      std::copy(ri, ri + cols, ci);
    else
      for (int64_t j = 0; j < cols; ++j) ci[j] = ri[j] + start.bias[j];
  }
}

template <typename T>
struct Tile {
  typedef T Vec __attribute__((vector_size(kVectorBytes)));
  static constexpr int kLanes = kVectorBytes / sizeof(T);
  static constexpr int kNR = 2 * kLanes;
  // Half a vector, for a C exactly that narrow: attention's per-head products at head size 8 on AVX-512
  // (P V, and dq, dk, dv in backward) would otherwise run full 16-lane tiles on 8 useful columns and pack
  // their B. Only where a half vector is still a whole SIMD register (AVX and wider).
  typedef T HalfVec __attribute__((vector_size(kVectorBytes / 2)));
  static constexpr bool kHasHalf = kVectorBytes >= 32;
  static constexpr int kHalfLanes = kLanes / 2;

  // c (kMR x kVectors*kLanes) = or += a (kMR x kc) . b (kc x kVectors*kLanes, rows ldb apart: a packed
  // sliver with ldb = kNR, or a small row-major B read in place).
  // A is read in place: element (i, p) at a[i * lda + p] when kRowMajorA, else a[i + p * lda] (a
  // transposed operand, or a packed sliver with lda = kMR). Each kMR-row sliver is reused across every
  // column sliver from L1, so packing it would only add a transposing copy (a third of a small product).
  // V is the vector type: Vec, or HalfVec for a tile half a vector wide.
  // Unless `accumulate`, a non-empty `start` (see CStart) is what the sum is added to: C's tile is
  // written once, as start + sum, with the bits of writing the start into C and then accumulating.
  template <bool kRowMajorA, int kVectors, typename V = Vec>
  static void kernel(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
                     bool accumulate, CStart<T> start = {}) {
    constexpr int lanes = sizeof(V) / sizeof(T);
    V acc[kMR][kVectors];
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kVectors; ++j) acc[i][j] = V{};
    for (int64_t p = 0; p < kc; ++p, b += ldb) {
      V bv[kVectors];
      for (int j = 0; j < kVectors; ++j) bv[j] = load<V>(b + j * lanes);
#pragma GCC unroll 16
      for (int i = 0; i < kMR; ++i) {
        const T ai = kRowMajorA ? a[i * lda + p] : a[i + p * lda];
        for (int j = 0; j < kVectors; ++j) acc[i][j] = fused_madd(acc[i][j], ai, bv[j]);
      }
    }
    // What the sums are added to: C itself, the start's residual (plus its bias, if any), its bias alone
    // (the same row for every i), or nothing.
    const T* base = accumulate ? c : start.residual ? start.residual : start.bias;
    const int64_t ld_base = accumulate ? ldc : start.residual ? start.ld : 0;
    const T* bias = accumulate || !start.residual ? nullptr : start.bias;
    for (int i = 0; i < kMR; ++i)
      for (int j = 0; j < kVectors; ++j) {
        V v = acc[i][j];
        if (base) {
          V old = load<V>(base + i * ld_base + j * lanes);
          if (bias) old = old + load<V>(bias + j * lanes);
          v = old + v;
        }
        store(c + i * ldc + j * lanes, v);
      }
  }

  // One tile of C: the kernel straight into C when the tile is whole (or exactly one or half a vector
  // wide), else, where it is cut by C's edge, the kernel into a scratch tile (as narrow as the cut allows)
  // and then its rows x cols corner into C. The same arithmetic either way, so every element gets the
  // same bits. A kernel never reads more columns of B than the tile is wide.
  template <bool kRowMajorA>
  __attribute__((always_inline)) static void run(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb,
                                                 T* c, int64_t ldc, bool accumulate, int64_t rows,
                                                 int64_t cols, CStart<T> start = {}) {
    if (rows == kMR && cols == kNR)
      return kernel<kRowMajorA, 2>(kc, a, lda, b, ldb, c, ldc, accumulate, start);
    if (rows == kMR && cols == kLanes)
      return kernel<kRowMajorA, 1>(kc, a, lda, b, ldb, c, ldc, accumulate, start);
    if (kHasHalf && rows == kMR && cols == kHalfLanes)
      return kernel<kRowMajorA, 1, HalfVec>(kc, a, lda, b, ldb, c, ldc, accumulate, start);
    alignas(64) T tile[kMR * kNR];
    if (kHasHalf && cols <= kHalfLanes)
      kernel<kRowMajorA, 1, HalfVec>(kc, a, lda, b, ldb, tile, kNR, false);
    else if (cols <= kLanes)
      kernel<kRowMajorA, 1>(kc, a, lda, b, ldb, tile, kNR, false);
    else
      kernel<kRowMajorA, 2>(kc, a, lda, b, ldb, tile, kNR, false);
    // At C's edge only: the start written first, then the sums added, as the whole tile's store adds them.
    if (!accumulate && !start.empty()) {
      write_start(start, rows, cols, c, ldc);
      accumulate = true;
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * kNR + j] : tile[i * kNR + j];
  }
};

// rows (<= kMR) x kc of A -> one sliver stored k-major (kc x kMR), zero-padded to kMR rows: for the
// sliver cut by the last row, and for an A with no unit stride.
template <typename T>
void pack_a_sliver(int64_t rows, int64_t kc, MatView<T> a, T* dst) {
  if (rows < kMR) std::fill(dst, dst + kMR * kc, T(0));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t p = 0; p < kc; ++p) dst[p * kMR + i] = a.data[i * a.row_stride + p * a.col_stride];
}

// `slivers` whole slivers of a transposed A (the first row's elements of each step of k contiguous) ->
// stored as pack_a_sliver stores each, one after another. Step of k outermost: each row of A^T (a token's
// row of dY in dY^T X) is read once, as slivers x kMR contiguous elements, where a pass per sliver would
// walk all the block's rows of A^T once per sliver.
template <typename T>
void pack_a_block(int64_t slivers, int64_t kc, MatView<T> a, T* dst) {
  const T* src = a.data;
  for (int64_t p = 0; p < kc; ++p, src += a.col_stride)
    for (int64_t s = 0; s < slivers; ++s)
      std::memcpy(dst + s * kMR * kc + p * kMR, src + s * kMR, sizeof(T) * kMR);
}

// A transposed A is packed (rather than read in place) when its columns are at least kPackAMinStride
// elements apart and C's block has at least kPackAMinCols columns (see multiply_block).
constexpr int64_t kPackAMinStride = 512;
constexpr int64_t kPackAMinCols = 256;

// A B with no unit column stride is packed kPackDepth rows of a sliver at a time (16 floats: one cache
// line of each column), prefetching kPackAhead blocks ahead (see pack_b).
constexpr int64_t kPackDepth = 16;
constexpr int64_t kPackAhead = 4;

// kc x cols of B -> slivers of kNR columns, each stored k-major (kc x kNR), the last one zero-padded.
template <typename T>
void pack_b(int64_t kc, int64_t cols, MatView<T> b, T* dst) {
  constexpr int kNR = Tile<T>::kNR;
  for (int64_t c0 = 0; c0 < cols; c0 += kNR, dst += kNR * kc) {
    const int64_t nr = std::min<int64_t>(kNR, cols - c0);
    const T* src = b.data + c0 * b.col_stride;
    if (nr < kNR) std::fill(dst, dst + kNR * kc, T(0));
    if (b.col_stride == 1 && nr == kNR) {  // row-major B: each sliver row is a contiguous run
      using Vec = typename Tile<T>::Vec;   // kNR is two vectors: two vector moves, no call to memcpy
      constexpr int kLanes = Tile<T>::kLanes;
      for (int64_t p = 0; p < kc; ++p) {
        store(dst + p * kNR, load<Vec>(src + p * b.row_stride));
        store(dst + p * kNR + kLanes, load<Vec>(src + p * b.row_stride + kLanes));
      }
    } else if (b.col_stride == 1) {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < nr; ++j) dst[p * kNR + j] = src[p * b.row_stride + j];
    } else {  // a transposed weight (a Linear's forward): read each column contiguously
      // kPackDepth rows of the sliver at a time, the columns' reads prefetched kPackAhead such blocks
      // ahead: these weights were last touched by the optimizer, a step ago, and come from memory. Column
      // by column over the whole sliver, the pack would wait on each of them.
      for (int64_t p0 = 0; p0 < kc; p0 += kPackDepth) {
        const int64_t p1 = std::min(kc, p0 + kPackDepth),
                      ahead = std::min(kc - 1, p0 + kPackAhead * kPackDepth);
        for (int64_t j = 0; j < nr; ++j) {
          const T* column = src + j * b.col_stride;
          __builtin_prefetch(column + ahead * b.row_stride);
          for (int64_t p = p0; p < p1; ++p) dst[p * kNR + j] = column[p * b.row_stride];
        }
      }
    }
  }
}

// Grows a per-thread scratch buffer to at least n elements; kept across calls, so the steady state of a
// training loop allocates nothing here.
template <typename T>
T* scratch(Buffer<T>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

// Where a kc x nc block of B is read from: packed slivers (sliver j at data + j * kc * kNR, rows kNR
// apart), or B itself in place (sliver j at data + j * kNR, rows row_stride apart).
template <typename T>
struct BlockB {
  const T* data;
  int64_t row_stride;
  int64_t sliver_stride;
};

// c[rows x nc] (+)= a[rows x kc] . B's kc x nc block: runs the micro-kernel over every pair of slivers,
// kMC rows of A at a time (they stay in L2 across the column slivers). Unless `add`, a non-empty `start`
// is read by the kernel as what each tile's sum is added to.
template <typename T>
void multiply_block(int64_t rows, int64_t nc, int64_t kc, MatView<T> a, BlockB<T> b, T* c, int64_t ldc,
                    bool add, CStart<T> start = {}) {
  constexpr int kNR = Tile<T>::kNR;
  const bool row_major_a = a.col_stride == 1, col_major_a = a.row_stride == 1 && !row_major_a;
  // Whole slivers of A are read in place, except a transposed A far apart in memory (each step of k a new
  // row of, say, dY in dY^T X) and reused by many column slivers: packed, its reads run along one
  // contiguous sliver. Many column slivers (medium's weight gradients) repay the copy; few (tiny, small)
  // do not.
  const bool a_in_place =
      row_major_a || (col_major_a && !(a.col_stride >= kPackAMinStride && nc >= kPackAMinCols));
  thread_local Buffer<T> packed_a_buffer;
  T* packed_a = scratch(packed_a_buffer, kMC * kKC);
  for (int64_t ic = 0; ic < rows; ic += kMC) {
    const int64_t mc = std::min(kMC, rows - ic);
    int64_t packed_rows = 0;  // rows of the block whose slivers are packed already
    if (!a_in_place && col_major_a) {
      packed_rows = mc / kMR * kMR;
      pack_a_block(mc / kMR, kc, MatView<T>{a.data + ic * a.row_stride, a.row_stride, a.col_stride},
                   packed_a);
    }
    for (int64_t ir = packed_rows; ir < mc; ir += kMR) {  // slivers that cannot be read in place
      const int64_t mr = std::min<int64_t>(kMR, mc - ir);
      if (mr < kMR || !a_in_place)
        pack_a_sliver(mr, kc, MatView<T>{a.data + (ic + ir) * a.row_stride, a.row_stride, a.col_stride},
                      packed_a + ir * kc);
    }
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      const int64_t nr = std::min<int64_t>(kNR, nc - jr);
      const T* bs = b.data + jr / kNR * b.sliver_stride;
      for (int64_t ir = 0; ir < mc; ir += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, mc - ir);
        const T* as = a.data + (ic + ir) * a.row_stride;
        T* ct = c + (ic + ir) * ldc + jr;
        const CStart<T> tile_start = add ? CStart<T>{} : start.at(ic + ir, jr);
        if (mr == kMR && row_major_a)
          Tile<T>::template run<true>(kc, as, a.row_stride, bs, b.row_stride, ct, ldc, add, mr, nr,
                                      tile_start);
        else if (mr == kMR && a_in_place)
          Tile<T>::template run<false>(kc, as, a.col_stride, bs, b.row_stride, ct, ldc, add, mr, nr,
                                       tile_start);
        else
          Tile<T>::template run<false>(kc, packed_a + ir * kc, kMR, bs, b.row_stride, ct, ldc, add, mr, nr,
                                       tile_start);
      }
    }
  }
}

// A B small enough to stay in L1/L2 whole, row-major and a whole number of vectors wide (or exactly half
// a vector), is read in place: packing it would cost as much as the product when A has few rows
// (attention's per-head products: P V, dP K, ...).
template <typename T>
bool read_b_in_place(int64_t cols, int64_t inner, MatView<T> b) {
  const bool whole_vectors =
      cols % Tile<T>::kLanes == 0 || (Tile<T>::kHasHalf && cols == Tile<T>::kHalfLanes);
  return b.col_stride == 1 && whole_vectors && inner <= kKC &&
         inner * cols * static_cast<int64_t>(sizeof(T)) <= kInPlaceBBytes;
}

template <typename T>
void gemm_serial(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
                 bool accumulate, CStart<T> start = {}) {
  constexpr int kNR = Tile<T>::kNR;
  if (read_b_in_place(cols, inner, b)) {
    multiply_block(rows, cols, inner, a, BlockB<T>{b.data, b.row_stride, kNR}, c, ldc, accumulate, start);
    return;
  }
  thread_local Buffer<T> packed_b_buffer;
  T* packed_b = scratch(packed_b_buffer, (std::min(kNC, cols) + kNR - 1) / kNR * kNR * std::min(kKC, inner));
  for (int64_t jc = 0; jc < cols; jc += kNC) {
    const int64_t nc = std::min(kNC, cols - jc);
    for (int64_t pc = 0; pc < inner; pc += kKC) {
      const int64_t kc = std::min(kKC, inner - pc);
      pack_b(kc, nc, MatView<T>{b.data + pc * b.row_stride + jc * b.col_stride, b.row_stride, b.col_stride},
             packed_b);
      multiply_block(rows, nc, kc, MatView<T>{a.data + pc * a.col_stride, a.row_stride, a.col_stride},
                     BlockB<T>{packed_b, kNR, kNR * kc}, c + jc, ldc, accumulate || pc > 0, start.at(0, jc));
    }
  }
}

// A few rows of A times a large B = W^T (W row-major, out x in: a Linear's x W^T over one sequence, or
// the unembedding): packing B would copy all of W, transposing it, for the few rows that reuse it. Instead
// C^T = W A^T: W's rows are the micro-kernel's row operand, read in place (each element broadcast from
// memory, each kMR x kc block of W reused from L1 by every sliver of A^T), and A^T, small, is packed once
// (every slice, in slivers of kNR rows of A) and reused by every block of W. The kernel's kMR x kNR tile
// of C^T is then added to C transposed. Element (i, j) gets the kernel's sum over each slice from zero in
// order of p, W_jp a_ip being a_ip W_jp, and is stored as the kernel stores it (start or C, plus the
// slice's sum), so it has the bits gemm_serial gives it.

// Columns of C swept per slice: its rows x this many elements stay in L2 from one slice to the next.
constexpr int64_t kWeightRowsCBytes = 256 * 1024;

// Slivers [s0, s1) of A^T, A being rows x inner: each sliver kNR rows of A, slice after slice: slice pc
// at dst + slivers * kNR * pc, its sliver s at + s * kc * kNR, stored k-major (kc x kNR), zero-padded.
// Each slice's slivers are packed as pack_b packs a B (kc x their rows).
template <typename T>
void pack_a_transposed(int64_t rows, int64_t inner, MatView<T> a, T* dst, int64_t s0, int64_t s1) {
  constexpr int kNR = Tile<T>::kNR;
  const int64_t slivers = (rows + kNR - 1) / kNR, r0 = s0 * kNR, r1 = std::min(rows, s1 * kNR);
  for (int64_t pc = 0; pc < inner; pc += kKC) {
    const int64_t kc = std::min(kKC, inner - pc);
    pack_b(kc, r1 - r0,
           MatView<T>{a.data + r0 * a.row_stride + pc * a.col_stride, a.col_stride, a.row_stride},
           dst + slivers * kNR * pc + s0 * kc * kNR);
  }
}

// Whether store_transposed_tile takes this type's whole tiles: kMR 8 (AVX-512) or 6 (AVX2), 8 elements
// in at most one vector register (AVX-512, and float on AVX2) and rows of C in blocks of 8.
template <typename T>
constexpr bool kTransposedTileStore =
    (kMR == 8 || kMR == 6) && (8 * static_cast<int>(sizeof(T)) <= kVectorBytes) && Tile<T>::kNR % 8 == 0;

template <typename T>
void store_transposed_tile(const T* tile, T* c, int64_t ldc, int64_t row0, int64_t col, bool add,
                           CStart<T> start);

// Columns [j0, j1) of C = rows x inner of A (packed by pack_a_transposed) times W^T (W's row j at
// w + j * ldw, contiguous).
template <typename T>
void gemm_weight_rows(int64_t j0, int64_t j1, int64_t rows, int64_t inner, const T* packed_a, const T* w,
                      int64_t ldw, T* c, int64_t ldc, bool accumulate, CStart<T> start) {
  constexpr int kNR = Tile<T>::kNR, kLanes = Tile<T>::kLanes;
  const int64_t slivers = (rows + kNR - 1) / kNR;
  const int64_t chunk =
      std::max<int64_t>(kMR, kWeightRowsCBytes / (rows * static_cast<int64_t>(sizeof(T))) / kMR * kMR);
  alignas(64) T tile[kMR * kNR];
  alignas(64) T packed_w[kMR * kKC];  // the block of W cut by C's last column, zero-padded
  for (int64_t jc = j0; jc < j1; jc += chunk) {
    const int64_t jend = std::min(j1, jc + chunk);
    for (int64_t pc = 0; pc < inner; pc += kKC) {
      const int64_t kc = std::min(kKC, inner - pc);
      const T* as = packed_a + slivers * kNR * pc;
      const bool add = accumulate || pc > 0;
      for (int64_t jr = jc; jr < jend; jr += kMR) {
        const int64_t mr = std::min<int64_t>(kMR, jend - jr);
        const T* ws = w + jr * ldw + pc;
        if (mr < kMR) pack_a_sliver(mr, kc, MatView<T>{ws, ldw, 1}, packed_w);
        for (int64_t s = 0; s < slivers; ++s) {
          const int64_t nr = std::min<int64_t>(kNR, rows - s * kNR);
          const T* bs = as + s * kc * kNR;
          if (mr == kMR && nr <= kLanes)
            Tile<T>::template kernel<true, 1>(kc, ws, ldw, bs, kNR, tile, kNR, false);
          else if (mr == kMR)
            Tile<T>::template kernel<true, 2>(kc, ws, ldw, bs, kNR, tile, kNR, false);
          else if (nr <= kLanes)
            Tile<T>::template kernel<false, 1>(kc, packed_w, kMR, bs, kNR, tile, kNR, false);
          else
            Tile<T>::template kernel<false, 2>(kc, packed_w, kMR, bs, kNR, tile, kNR, false);
          if constexpr (kTransposedTileStore<T>) {
            if (mr == kMR && nr == kNR) {
              store_transposed_tile(tile, c, ldc, s * kNR, jr, add, start);
              continue;
            }
          }
          // As the kernel's store: C + sum, or start + sum (residual + bias, the residual, the bias).
          for (int64_t i = 0; i < nr; ++i) {
            const int64_t row = s * kNR + i;
            T* ci = c + row * ldc + jr;
            const T* ri = start.residual ? start.residual + row * start.ld + jr : nullptr;
            const T* bi = start.bias ? start.bias + jr : nullptr;
            for (int64_t j = 0; j < mr; ++j) {
              const T sum = tile[j * kNR + i];
              if (add)
                ci[j] = ci[j] + sum;
              else if (ri)
                ci[j] = (bi ? ri[j] + bi[j] : ri[j]) + sum;
              else
                ci[j] = bi ? bi[j] + sum : sum;
            }
          }
        }
      }
    }
  }
}

// Whether C = A W^T runs as gemm_weight_rows: B's columns contiguous (W's rows), A at most
// kGemmWeightRowsMaxRows rows, B wider than A is tall (packing A^T copies less than packing B), and an
// inner dimension of at least kGemmWeightRowsMinInner (a head's keys, K^T in Q K^T, keep the packed path:
// over so short a sum the transposed stores of C would cost more than packing K).
template <typename T>
bool weight_rows(int64_t rows, int64_t cols, int64_t inner, MatView<T> b) {
  return b.row_stride == 1 && b.col_stride != 1 && rows <= kGemmWeightRowsMaxRows && cols >= rows &&
         inner >= kGemmWeightRowsMinInner;
}

// gemm_weight_rows over all of C, its columns split over the pool (in blocks of kMR) when large.
template <typename T>
void gemm_by_weight_rows(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c,
                         int64_t ldc, bool accumulate, CStart<T> start, bool serial) {
  constexpr int kNR = Tile<T>::kNR;
  thread_local Buffer<T> packed_a_buffer;
  const int64_t slivers = (rows + kNR - 1) / kNR;
  T* packed_a = scratch(packed_a_buffer, slivers * kNR * inner);
  // Split too when C is: A's rows were written by the pool's threads, each packing the ones it wrote.
  const auto pack = [&](int64_t s0, int64_t s1) { pack_a_transposed(rows, inner, a, packed_a, s0, s1); };
  if (serial)
    pack(0, slivers);
  else
    parallel_for(slivers, rows * inner, pack);
  split_units((cols + kMR - 1) / kMR, 2 * rows * cols * inner, serial, [&](int64_t b0, int64_t b1) {
    gemm_weight_rows(std::min(cols, b0 * kMR), std::min(cols, b1 * kMR), rows, inner, packed_a, b.data,
                     b.col_stride, c, ldc, accumulate, start);
  });
}

// A small C over a deep inner dimension (a weight's gradient dY^T X: C is out x in, the inner dimension
// the tokens), one part per kKC-deep slice: part j sums slice j into its own scratch C, as gemm_serial
// would from zero, and the parts are then added to C in slice order, as gemm_serial adds them. So the
// bits are those of the serial product. A column split would give such a C only a few parts, each
// reading every token's rows; here each part reads only its slice's tokens, the rows that the same
// thread wrote in the ops before (threads.h: a thread runs its own share of every job).
template <typename T>
void gemm_by_slices(int64_t rows, int64_t cols, int64_t inner, int64_t slices, MatView<T> a, MatView<T> b,
                    T* c, int64_t ldc, bool accumulate, CStart<T> start) {
  thread_local Buffer<T> partials_buffer;
  const int64_t size = rows * cols;
  T* partials = scratch(partials_buffer, slices * size);
  parallel_for(slices, 2 * size * inner, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t p0 = j * kKC, kc = std::min(kKC, inner - p0);
      gemm_serial(rows, cols, kc, MatView<T>{a.data + p0 * a.col_stride, a.row_stride, a.col_stride},
                  MatView<T>{b.data + p0 * b.row_stride, b.row_stride, b.col_stride}, partials + j * size,
                  cols, false);
    }
  });
  const bool write_starts = !accumulate && !start.empty();
  parallel_for(rows, size * slices, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      T* ci = c + i * ldc;
      if (write_starts) write_start(start.at(i, 0), 1, cols, ci, ldc);
      for (int64_t j = 0; j < slices; ++j) {
        const T* pi = partials + j * size + i * cols;
        if (j == 0 && !accumulate && !write_starts)
          std::copy(pi, pi + cols, ci);
        else
          for (int64_t x = 0; x < cols; ++x) ci[x] += pi[x];
      }
    }
  });
}

// One step of an L x L transpose held in L vectors: exchanges bit D of the row index with bit D of the
// column index. Rows i and i | D give the new rows i (kHigh false) and i | D (kHigh true).
template <typename V, int L, int D, bool kHigh, size_t... K>
V butterfly(V lo, V hi, std::index_sequence<K...>) {
  return __builtin_shufflevector(
      lo, hi, static_cast<int>(kHigh ? ((K & D) ? L + K : K + D) : ((K & D) ? L + K - D : K))...);
}

// r[i][k] becomes r[k][i]: log2(L) butterfly steps, L shuffles each.
template <typename V, int L, int D = 1>
void transpose(V (&r)[L]) {
  if constexpr (D < L) {
    for (int i = 0; i < L; ++i)
      if (!(i & D)) {
        const V lo = r[i], hi = r[i | D];
        r[i] = butterfly<V, L, D, false>(lo, hi, std::make_index_sequence<L>{});
        r[i | D] = butterfly<V, L, D, true>(lo, hi, std::make_index_sequence<L>{});
      }
    transpose<V, L, D * 2>(r);
  }
}

// Lanes [kOff, kOff + kLen) of v, the sums for C's columns ci[kOff..]: stored as gemm_weight_rows' scalar
// loop stores them (C + sum, or start + sum, the start being ri + bi, ri or bi), as one vector of kLen.
template <int kOff, int kLen, typename T, typename V, size_t... L>
void store_lanes(V v, T* ci, const T* ri, const T* bi, bool add, std::index_sequence<L...>) {
  typedef T P __attribute__((vector_size(kLen * sizeof(T))));
  P x = __builtin_shufflevector(v, v, static_cast<int>(kOff + L)...);
  if (add) {
    x = load<P>(ci + kOff) + x;
  } else if (ri) {
    P base = load<P>(ri + kOff);
    if (bi) base = base + load<P>(bi + kOff);
    x = base + x;
  } else if (bi) {
    x = load<P>(bi + kOff) + x;
  }
  store(ci + kOff, x);
}

// A whole kMR x kNR tile of C^T (tile[j * kNR + i]: W's row j, A's row i) added to C's rows
// [row0, row0 + kNR) and columns [col, col + kMR): each 8 x 8 block (its rows past kMR zero) transposed
// in registers, then C's kMR columns of each row stored by store_lanes (8 lanes, or 4 and 2).
template <typename T>
void store_transposed_tile(const T* tile, T* c, int64_t ldc, int64_t row0, int64_t col, bool add,
                           CStart<T> start) {
  typedef T V8 __attribute__((vector_size(8 * sizeof(T))));
  constexpr int kNR = Tile<T>::kNR;
  for (int b = 0; b < kNR; b += 8) {
    V8 r[8];
    for (int j = 0; j < 8; ++j) r[j] = j < kMR ? load<V8>(tile + j * kNR + b) : V8{};
    transpose<V8, 8>(r);  // r[k]: C's row row0 + b + k, its columns in lanes 0 .. kMR - 1
    for (int k = 0; k < 8; ++k) {
      const int64_t row = row0 + b + k;
      T* ci = c + row * ldc + col;
      const T* ri = start.residual ? start.residual + row * start.ld + col : nullptr;
      const T* bi = start.bias ? start.bias + col : nullptr;
      if constexpr (kMR == 8) {
        store_lanes<0, 8>(r[k], ci, ri, bi, add, std::make_index_sequence<8>{});
      } else {
        store_lanes<0, 4>(r[k], ci, ri, bi, add, std::make_index_sequence<4>{});
        store_lanes<4, 2>(r[k], ci, ri, bi, add, std::make_index_sequence<2>{});
      }
    }
  }
}

// Columns of C up to which gemm_row gathers a B with no unit column stride lane by lane (see gemm_row).
constexpr int kGemmRowNarrow = 8;

// The vector of col[l][offset] for the lanes l in L, the others 0: built in registers from scalar loads
// (a vector filled lane by lane through memory waits on a store-forwarding failure at every step).
template <typename V, typename T, size_t... L>
V gather_lanes(const T* const* col, int64_t offset, std::index_sequence<L...>) {
  return V{col[L][offset]...};
}

// Stores one slice's sums of `width` columns of a C of one row (lane l of the vectors, in order) as the
// kernel stores them: C + sum after the first slice (or when accumulating), else start + sum, the start
// being residual + bias, the residual, the bias, or nothing.
template <typename T, typename V, int N>
void store_row_sums(const V (&acc)[N], int64_t width, T* c, bool add, CStart<T> start) {
  constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(T));
  for (int64_t l = 0; l < width; ++l) {
    const T sum = acc[l / kLanes][l % kLanes];
    if (add)
      c[l] = c[l] + sum;
    else if (start.residual)
      c[l] = (start.bias ? start.residual[l] + start.bias[l] : start.residual[l]) + sum;
    else
      c[l] = start.bias ? start.bias[l] + sum : sum;
  }
}

// Columns [c0, c1) of a C of one row: a decoding step's products (one token through a Linear, one query
// against the cached keys). B is read once, so packing it would cost more than the product (a Linear's B is
// W^T, whose packing is a transposing copy of all of W). Instead B is read in place: when its columns are
// contiguous (B = W^T), kLanes columns by kLanes steps of p are loaded as vectors and transposed in
// registers; otherwise each vector of B's row p is loaded, or gathered (only the block's columns when
// there are at most kGemmRowNarrow, and then from any B). The sums are the micro-kernel's (fused_madd of
// a_p and B's row p, in vectors of C's columns): each kKC slice from zero in order of p, then added to the
// start or to C. So every element has the bits gemm_serial gives it.
template <typename T>
void gemm_row(int64_t c0, int64_t c1, int64_t inner, MatView<T> a, MatView<T> b, T* c, bool accumulate,
              CStart<T> start) {
  using Vec = typename Tile<T>::Vec;
  constexpr int kLanes = Tile<T>::kLanes;
  constexpr int kVectors = 2;  // vectors of C's columns summed together
  constexpr int kBlock = kVectors * kLanes;
  constexpr int64_t kRowAhead = 4 * 64 / static_cast<int64_t>(sizeof(T));  // 4 cache lines
  for (int64_t j0 = c0; j0 < c1; j0 += kBlock) {
    const int64_t width = std::min<int64_t>(kBlock, c1 - j0);
    // Column l of the block starts at col[l]; past C's last column, at its first (read, never stored).
    const T* col[kBlock];
    for (int64_t l = 0; l < kBlock; ++l) col[l] = b.data + (j0 + (l < width ? l : 0)) * b.col_stride;
    const bool contiguous_rows = b.col_stride == 1 && width == kBlock;
    // A few columns far apart (K^T in one query's scores over a few keys): only their lanes of B's row p
    // are read, into one vector, rather than kBlock columns loaded and transposed for them.
    constexpr int kNarrow = std::min(kGemmRowNarrow, kLanes);
    const bool narrow = width <= kNarrow && b.col_stride != 1;
    const bool contiguous_columns = b.row_stride == 1 && b.col_stride != 1 && !narrow;
    for (int64_t pc = 0; pc < inner; pc += kKC) {
      const int64_t kc = std::min(kKC, inner - pc);
      Vec acc[kVectors];
      for (int v = 0; v < kVectors; ++v) acc[v] = Vec{};
      int64_t p = pc;
      if (narrow)
        for (; p < pc + kc; ++p) {
          const T ap = a.data[p * a.col_stride];
          const int64_t offset = p * b.row_stride;
          // Lanes past the last column read column j0 (col's padding) and are never stored.
          acc[0] =
              fused_madd(acc[0], ap, gather_lanes<Vec>(col, offset, std::make_index_sequence<kNarrow>{}));
        }
      if (contiguous_columns)
        for (; p + kLanes <= pc + kc; p += kLanes) {
          Vec t[kVectors][kLanes];
          // B comes from memory once (a weight matrix per token): kBlock rows of W streamed side by side
          // are more than the hardware prefetcher follows, so each is prefetched kRowAhead lines ahead.
          for (int l = 0; l < kBlock; ++l) __builtin_prefetch(col[l] + p + kRowAhead);
          for (int v = 0; v < kVectors; ++v) {
            for (int l = 0; l < kLanes; ++l) t[v][l] = load<Vec>(col[v * kLanes + l] + p);
            transpose<Vec, kLanes>(t[v]);  // t[v][k]: B's row p + k, the vector's columns
          }
          for (int k = 0; k < kLanes; ++k) {
            const T ap = a.data[(p + k) * a.col_stride];
            for (int v = 0; v < kVectors; ++v) acc[v] = fused_madd(acc[v], ap, t[v][k]);
          }
        }
      for (; p < pc + kc; ++p) {
        const T ap = a.data[p * a.col_stride];
        const int64_t offset = p * b.row_stride;
        for (int v = 0; v < kVectors; ++v) {
          Vec bv = Vec{};  // every lane is written below; zeroed so GCC sees that
          if (contiguous_rows)
            bv = load<Vec>(col[v * kLanes] + offset);
          else
            for (int lane = 0; lane < kLanes; ++lane) bv[lane] = col[v * kLanes + lane][offset];
          acc[v] = fused_madd(acc[v], ap, bv);
        }
      }
      store_row_sums(acc, width, c + j0, accumulate || pc > 0, start.at(0, j0));
    }
  }
}

// The packed copy of one matrix (PackedWeights): panels of kPanel rows of W, panel k at
// panels.data() + k * kPanel * in, its element (p, l) at p * kPanel + l.
template <typename T>
struct PackedPanels {
  static constexpr int kPanel = 2 * Tile<T>::kLanes;
};

// Columns [k0 * kPanel, min(k1 * kPanel, cols)) of a C of one row, C = start + a W^T (or C += a W^T), from
// W's packed panels: each panel's two vectors of C's columns summed as gemm_row sums them (fused_madd of a_p
// and W's column p, each kKC slice from zero in order of p, then added to the start or to C), so every
// element has gemm_row's bits, and gemm_serial's.
template <typename T>
void gemm_packed_row(int64_t k0, int64_t k1, int64_t cols, int64_t inner, MatView<T> a, const T* panels, T* c,
                     bool accumulate, CStart<T> start) {
  using Vec = typename Tile<T>::Vec;
  constexpr int kLanes = Tile<T>::kLanes;
  constexpr int kPanel = PackedPanels<T>::kPanel;
  for (int64_t k = k0; k < k1; ++k) {
    const T* panel = panels + k * kPanel * inner;
    const int64_t j0 = k * kPanel, width = std::min<int64_t>(kPanel, cols - j0);
    for (int64_t pc = 0; pc < inner; pc += kKC) {
      const int64_t end = std::min(inner, pc + kKC);
      Vec acc[2] = {Vec{}, Vec{}};
      for (int64_t p = pc; p < end; ++p) {
        const T ap = a.data[p * a.col_stride];
        acc[0] = fused_madd(acc[0], ap, load<Vec>(panel + p * kPanel));
        acc[1] = fused_madd(acc[1], ap, load<Vec>(panel + p * kPanel + kLanes));
      }
      store_row_sums(acc, width, c + j0, accumulate || pc > 0, start.at(0, j0));
    }
  }
}

// The set of packed weights in use on this thread (UsePackedWeights).
template <typename T>
const PackedWeights<T>*& packed_weights_in_use() {
  thread_local const PackedWeights<T>* in_use = nullptr;
  return in_use;
}

// A product of at most this many multiply-adds (attention's per-head products over a few positions:
// dv = P^T dout and dk = dS^T q over one query row) runs a row at a time through gemm_row: packing it
// into zero-padded slivers and storing it through a scratch tile would cost more than its arithmetic.
// gemm_row sums and stores every element as the micro-kernel does, with the same vector multiply-add
// (fused_madd(acc, a_p, B's row p)): the same bits, on every CPU and at every optimisation level.
constexpr int64_t kTinyMacs = 512;

// Both public forms of gemm: C (+)= A B, or C = start + A B when `start` is not empty (and not
// `accumulate`).
template <typename T>
void gemm_from(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
               bool accumulate, CStart<T> start) {
  if (rows <= 0 || cols <= 0) return;
  if (inner == 0) {  // an empty sum
    if (!accumulate && !start.empty())
      write_start(start, rows, cols, c, ldc);
    else if (!accumulate)
      for (int64_t i = 0; i < rows; ++i) std::fill(c + i * ldc, c + i * ldc + cols, T(0));
    return;
  }
  const int64_t flops = 2 * rows * cols * inner;
  const int64_t threads = num_threads();
  const bool serial =
      flops < (rows == 1 ? kParallelRowFlops : kParallelFlops) || threads < 2 || detail::in_parallel_region();
  // A decoding step whose B is a weight with a packed copy in use (UsePackedWeights) reads that copy.
  const PackedWeights<T>* packed = rows == 1 ? packed_weights_in_use<T>() : nullptr;
  if (const typename PackedWeights<T>::Matrix* w = packed && b.row_stride == 1 && b.col_stride == inner
                                                       ? packed->find(b.data, cols, inner)
                                                       : nullptr) {
    constexpr int64_t kPanel = PackedPanels<T>::kPanel;
    return split_units((cols + kPanel - 1) / kPanel, flops, serial, [&](int64_t k0, int64_t k1) {
      gemm_packed_row(k0, k1, cols, inner, a, w->panels.get(), c, accumulate, start);
    });
  }
  if (rows * cols * inner <= kTinyMacs) {
    for (int64_t i = 0; i < rows; ++i)
      gemm_row(0, cols, inner, MatView<T>{a.data + i * a.row_stride, a.row_stride, a.col_stride}, b,
               c + i * ldc, accumulate, start.at(i, 0));
    return;
  }
  if (rows == 1) {  // a decoding step: B read in place, split by blocks of columns when large
    constexpr int64_t kBlock = 4 * Tile<T>::kLanes;
    return split_units((cols + kBlock - 1) / kBlock, flops, serial, [&](int64_t b0, int64_t b1) {
      gemm_row(std::min(cols, b0 * kBlock), std::min(cols, b1 * kBlock), inner, a, b, c, accumulate, start);
    });
  }
  if (weight_rows(rows, cols, inner, b))
    return gemm_by_weight_rows(rows, cols, inner, a, b, c, ldc, accumulate, start, serial);
  if (serial) return gemm_serial(rows, cols, inner, a, b, c, ldc, accumulate, start);

  // Split over the pool (split_parts) by column slivers where there are enough: A is read in place, so each
  // part packs only its own columns of B and nothing is copied twice. Otherwise (a narrow C) by row slivers,
  // each part packing all of B. Either way every element of C is summed in the same order.
  constexpr int kNR = Tile<T>::kNR;
  const int64_t slices = (inner + kKC - 1) / kKC;
  if (slices >= threads && rows * cols <= kSliceSplitMaxC)
    return gemm_by_slices(rows, cols, inner, slices, a, b, c, ldc, accumulate, start);
  const int64_t col_slivers = (cols + kNR - 1) / kNR, row_slivers = (rows + kMR - 1) / kMR;
  const int64_t max_parts = split_parts(flops, threads);
  // A few column parts over a tall C (a Linear over many tokens with few outputs) leave little to hand
  // out to a late thread: when B is read in place, or small enough that packing it in every part is
  // cheap, rows give more parts (tiny's 1024 x 64 x 64 products, forward and dx).
  const bool cheap_b =
      read_b_in_place(cols, inner, b) || inner * cols * static_cast<int64_t>(sizeof(T)) <= kSmallBBytes;
  const bool rows_split_finer = cheap_b && col_slivers < max_parts && row_slivers > col_slivers;
  if (col_slivers >= threads && !rows_split_finer) {
    // Each part streams all of A once per slice, and reuses each block of A for its own columns only:
    // an A larger than L2 (a weight's gradient, dY^T X over many tokens) needs wide parts.
    const int64_t a_bytes = rows * inner * static_cast<int64_t>(sizeof(T));
    const int64_t min_slivers = a_bytes > kLargeABytes ? std::max<int64_t>(1, kLargeAMinCols / kNR) : 1;
    const int64_t parts = std::max<int64_t>(threads, std::min(col_slivers / min_slivers, max_parts));
    parallel_for(parts, flops, [&](int64_t p0, int64_t p1) {
      const int64_t c0 = col_slivers * p0 / parts * kNR, c1 = std::min(cols, col_slivers * p1 / parts * kNR);
      gemm_serial(rows, c1 - c0, inner, a, MatView<T>{b.data + c0 * b.col_stride, b.row_stride, b.col_stride},
                  c + c0, ldc, accumulate, start.at(0, c0));
    });
    return;
  }
  split_units(row_slivers, flops, /*serial=*/false, [&](int64_t s0, int64_t s1) {
    const int64_t r0 = s0 * kMR, r1 = std::min(rows, s1 * kMR);
    gemm_serial(r1 - r0, cols, inner, MatView<T>{a.data + r0 * a.row_stride, a.row_stride, a.col_stride}, b,
                c + r0 * ldc, ldc, accumulate, start.at(r0, 0));
  });
}

}  // namespace

template <typename T>
void gemm(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
          bool accumulate) {
  gemm_from(rows, cols, inner, a, b, c, ldc, accumulate, CStart<T>{});
}

template <typename T>
void gemm(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
          CStart<T> start) {
  gemm_from(rows, cols, inner, a, b, c, ldc, false, start);
}

template <typename T>
struct PackedWeights<T>::Matrix {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  const T* source;
  int64_t out, in;
  // From aligned_alloc, not tensor storage (Buffer, which asks for huge pages): a copy made once per
  // generation and read once per token gains little from huge pages, and a first allocation of them can
  // stall on the kernel's compaction (transparent huge pages' defrag on madvise).
  std::unique_ptr<T[], Free> panels;
};

// Orders PackedWeights' matrices by where their source is.
template <typename T>
bool source_before(const std::unique_ptr<typename PackedWeights<T>::Matrix>& m, const T* source) {
  return std::less<const T*>()(m->source, source);
}

template <typename T>
PackedWeights<T>::PackedWeights() = default;
template <typename T>
PackedWeights<T>::~PackedWeights() = default;
template <typename T>
PackedWeights<T>::PackedWeights(PackedWeights&&) noexcept = default;
template <typename T>
PackedWeights<T>& PackedWeights<T>::operator=(PackedWeights&&) noexcept = default;

template <typename T>
void PackedWeights<T>::add(const T* w, int64_t out, int64_t in) {
  if (!w || out < 1 || in < 1) throw std::invalid_argument("PackedWeights::add: an empty matrix");
  const auto at = std::lower_bound(matrices_.begin(), matrices_.end(), w, source_before<T>);
  if (at != matrices_.end() && (*at)->source == w) {
    if ((*at)->out != out || (*at)->in != in)
      throw std::invalid_argument("PackedWeights::add: a matrix added before with another shape");
    return;
  }
  constexpr int64_t kPanel = PackedPanels<T>::kPanel;
  const int64_t panels = (out + kPanel - 1) / kPanel;
  auto m = std::make_unique<Matrix>(Matrix{w, out, in, {}});
  // aligned_alloc wants a multiple of the alignment.
  m->panels.reset(
      static_cast<T*>(std::aligned_alloc(64, static_cast<size_t>(bytes_of(out, in) + 63) / 64 * 64)));
  if (!m->panels) throw std::bad_alloc();
  T* dst = m->panels.get();
  parallel_for(panels, 2 * out * in, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      // Written in order (the fresh pages first touched one after another), read kPanel rows side by side.
      T* panel = dst + k * kPanel * in;
      const int64_t rows = std::min<int64_t>(kPanel, out - k * kPanel);
      const T* src = w + k * kPanel * in;
      for (int64_t p = 0; p < in; ++p) {
        T* to = panel + p * kPanel;
        for (int64_t l = 0; l < rows; ++l) to[l] = src[l * in + p];
        for (int64_t l = rows; l < kPanel; ++l) to[l] = T(0);
      }
    }
  });
  matrices_.insert(at, std::move(m));
}

template <typename T>
int64_t PackedWeights<T>::bytes() const {
  int64_t n = 0;
  for (const auto& m : matrices_) n += bytes_of(m->out, m->in);
  return n;
}

template <typename T>
const typename PackedWeights<T>::Matrix* PackedWeights<T>::find(const T* source, int64_t out,
                                                                int64_t in) const {
  const auto at = std::lower_bound(matrices_.begin(), matrices_.end(), source, source_before<T>);
  if (at == matrices_.end() || (*at)->source != source || (*at)->out != out || (*at)->in != in)
    return nullptr;
  return at->get();
}

template <typename T>
int64_t PackedWeights<T>::bytes_of(int64_t out, int64_t in) {
  constexpr int64_t kPanel = PackedPanels<T>::kPanel;
  return (out + kPanel - 1) / kPanel * kPanel * in * static_cast<int64_t>(sizeof(T));
}

template <typename T>
int64_t gemm_packed_panel() {
  return PackedPanels<T>::kPanel;
}

template <typename T>
UsePackedWeights<T>::UsePackedWeights(const PackedWeights<T>* weights)
    : previous_(packed_weights_in_use<T>()) {
  packed_weights_in_use<T>() = weights;
}

template <typename T>
UsePackedWeights<T>::~UsePackedWeights() {
  packed_weights_in_use<T>() = previous_;
}

const char* gemm_vector_isa() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2+fma";
#elif defined(__AVX__)
  return "avx";
#elif defined(__SSE2__)
  return "sse";
#elif defined(__ARM_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

template void gemm<float>(int64_t, int64_t, int64_t, MatView<float>, MatView<float>, float*, int64_t, bool);
template void gemm<double>(int64_t, int64_t, int64_t, MatView<double>, MatView<double>, double*, int64_t,
                           bool);
template void gemm<float>(int64_t, int64_t, int64_t, MatView<float>, MatView<float>, float*, int64_t,
                          CStart<float>);
template void gemm<double>(int64_t, int64_t, int64_t, MatView<double>, MatView<double>, double*, int64_t,
                           CStart<double>);
template class PackedWeights<float>;
template class PackedWeights<double>;
template class UsePackedWeights<float>;
template class UsePackedWeights<double>;
template int64_t gemm_packed_panel<float>();
template int64_t gemm_packed_panel<double>();

}  // namespace ag
