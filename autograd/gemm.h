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

// The instruction set the GEMM's vector kernels were compiled to (the widest the compiler targets):
// "avx512", "avx2+fma", "avx", "sse" on x86-64; "neon" (Advanced SIMD) on aarch64; "scalar" where the
// vector types are lowered to scalar code. `attograd bench` reports it as vector_isa.
const char* gemm_vector_isa();

}  // namespace ag
