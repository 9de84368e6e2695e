// The engine's matrix product: C = A B (or C += A B) for float32 and float64, with each operand any
// strided view, so transposes and per-head column slices are read in place, never copied by the caller.
//
// It is a packed, cache-blocked GEMM in the style of GotoBLAS/BLIS: a block of B is copied into
// column slivers and a block of A into row slivers that the register-tiled micro-kernel streams through
// (gemm.cpp). Our own, rather than Eigen's, because Eigen 3.4's float32 kernel is slower at the models'
// shapes (docs/performance.md has the measurements).
//
// Determinism: every element of C is summed over the inner dimension in the same order whatever the
// block sizes, the split across threads or the thread count, so results are the same bits for any
// number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ag {

// A read-only matrix view: element (i, j) is data[i * row_stride + j * col_stride].
template <typename T>
struct MatView {
  const T* data;
  int64_t row_stride;
  int64_t col_stride;

  MatView transposed() const { return {data, col_stride, row_stride}; }
};

// A row-major matrix whose rows start `row_stride` elements apart (the number of columns, when dense).
template <typename T>
MatView<T> row_major(const T* data, int64_t row_stride) {
  return {data, row_stride, 1};
}

// The inner dimension is summed in slices of this depth, each slice's sum added to C in turn. So a product
// over inner = i0 + i1, with i0 a multiple of it, gives the same bits as one over the first i0 followed by
// one over the last i1 that accumulates: a caller may feed a long inner dimension in such pieces.
constexpr int64_t kGemmSliceDepth = 512;

// A product of at most this many rows by a B whose columns are contiguous (B = W^T, W row-major: a
// Linear over one sequence), at least as wide as A is tall and over an inner dimension of at least
// kGemmWeightRowsMinInner, reads W in place and packs A^T instead of B, with the same bits.
constexpr int64_t kGemmWeightRowsMaxRows = 256;
constexpr int64_t kGemmWeightRowsMinInner = 256;

// c (rows x cols, rows `ldc` apart) = a (rows x inner) * b (inner x cols), or += when `accumulate`.
// Large products are split by output rows over the thread pool; inside a parallel region it runs on the
// calling thread. `c` must not overlap `a` or `b`.
template <typename T>
void gemm(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
          bool accumulate);

// What a product starts C from instead of zero: row i of C starts as row i of `residual` (rows `ld`
// apart) + `bias` (one value per column); either may be null. A Linear's output: residual + bias + x W^T.
template <typename T>
struct CStart {
  const T* bias = nullptr;
  const T* residual = nullptr;
  int64_t ld = 0;

  bool empty() const { return !bias && !residual; }
  // The start of the block of C from (row, col) on.
  CStart at(int64_t row, int64_t col) const {
    return {bias ? bias + col : nullptr, residual ? residual + row * ld + col : nullptr, ld};
  }
};

// c = start + a * b, with the bits of writing the start into c and then calling gemm with `accumulate`
// (residual + bias first, then each slice of the product added in turn). The micro-kernel adds its first
// slice's sums to the start as it stores a tile, so C is written once, with no pass of its own over it.
template <typename T>
void gemm(int64_t rows, int64_t cols, int64_t inner, MatView<T> a, MatView<T> b, T* c, int64_t ldc,
          CStart<T> start);

// Weight matrices laid out for one-row products: a decoding step's x W^T, which reads each W once from
// memory. Read in place, W's rows are loaded a vector at a time side by side and transposed in registers,
// and those shuffles, not the memory, bound the product. A packed copy stores W in
// panels of gemm_packed_panel<T>() rows, each panel's elements in order of the inner index (panel[p * width
// + l] = W[j0 + l][p], zero past W's last row), so the product streams it once, in order, with no
// transposes. It costs a second copy of the matrices; the product has the bits of gemm on W itself.
template <typename T>
class PackedWeights {
 public:
  PackedWeights();
  ~PackedWeights();
  PackedWeights(PackedWeights&&) noexcept;
  PackedWeights& operator=(PackedWeights&&) noexcept;

  // Adds a packed copy of w (out x in, row-major, rows `in` apart), packed over the thread pool; a matrix
  // added before is skipped. w must stay alive and unchanged while this is in use (see UsePackedWeights).
  void add(const T* w, int64_t out, int64_t in);
  // Bytes of the packed copies.
  int64_t bytes() const;
  // Bytes of a packed copy of an out x in matrix (its last panel padded).
  static int64_t bytes_of(int64_t out, int64_t in);

  struct Matrix;  // gemm.cpp
  // The packed copy of the out x in matrix at `source`, or null.
  const Matrix* find(const T* source, int64_t out, int64_t in) const;

 private:
  std::vector<std::unique_ptr<Matrix>> matrices_;  // sorted by source
};

// Rows of a packed panel: two vectors of the widest SIMD type the GEMM's kernels use.
template <typename T>
int64_t gemm_packed_panel();

// While alive, gemm's one-row products on the constructing thread whose B is W^T for a matrix W of
// `weights` (B's columns contiguous, W dense) read its packed copy instead; with null, none does. Scopes
// nest: the destructor puts back the set that was in use before.
template <typename T>
class UsePackedWeights {
 public:
  explicit UsePackedWeights(const PackedWeights<T>* weights);
  ~UsePackedWeights();
  UsePackedWeights(const UsePackedWeights&) = delete;
  UsePackedWeights& operator=(const UsePackedWeights&) = delete;

 private:
  const PackedWeights<T>* previous_;
};

// The instruction set the GEMM's vector kernels were compiled to (the widest the compiler targets):
// "avx512", "avx2+fma", "avx", "sse" on x86-64; "neon" (Advanced SIMD) on aarch64; "scalar" where the
// vector types are lowered to scalar code. `attograd bench` reports it as vector_isa.
const char* gemm_vector_isa();

}  // namespace ag
