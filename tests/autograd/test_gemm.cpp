// ag::gemm (the packed GEMM under matmul, linear and attention) against a plain triple loop, on shapes
// that cross every blocking edge (the micro-tile, the packed depth of 512, the 2048-column panel), with
// transposed and strided operands; and the thread pool it runs on, under jobs of changing sizes.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "autograd/gemm.h"
#include "autograd/random.h"
#include "autograd/threads.h"

namespace {

// A rows x cols operand stored inside a larger buffer: transposed or not, with `pad` spare elements at
// the end of each stored row (like one head's columns inside a (T, D) activation).
template <typename T>
struct Operand {
  std::vector<T> storage;
  ag::MatView<T> view;
  T at(int64_t i, int64_t j) const { return view.data[i * view.row_stride + j * view.col_stride]; }
};

template <typename T>
Operand<T> make_operand(int64_t rows, int64_t cols, bool transposed, int64_t pad, uint64_t seed) {
  ag::Rng rng(seed);
  const int64_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  const int64_t ld = stored_cols + pad;
  Operand<T> o;
  o.storage.resize(static_cast<size_t>(std::max<int64_t>(1, stored_rows * ld)));
  for (T& v : o.storage) v = static_cast<T>(rng.normal(0.0, 1.0));
  const ag::MatView<T> stored = ag::row_major(o.storage.data(), ld);
  o.view = transposed ? stored.transposed() : stored;
  return o;
}

// Copies an operand into another element type, keeping its layout: the float32 operands are the float64
// ones rounded, as make_operand<float> makes them from the same seed.
template <typename T, typename S>
Operand<T> cast_operand(const Operand<S>& from) {
  Operand<T> o;
  o.storage.assign(from.storage.begin(), from.storage.end());
  o.view = ag::MatView<T>{o.storage.data() + (from.view.data - from.storage.data()), from.view.row_stride,
                          from.view.col_stride};
  return o;
}

// The reference product A B of one case, per element of C: the sum of the products as hi + lo, and the
// sum of their magnitudes. float32's sums are plain double (each product is exact there, and the sum's
// error is 2^-29 of the bound below). float64's are double-double (Ogita, Rump and Oishi's Dot2): each
// product enters exactly (std::fma gives a * b's rounding error) and TwoSum keeps each addition's error,
// so the reference is within about inner^2 2^-106 of sum |a_ip b_pj| (under 1e-30 of it at these sizes,
// where x86's 80-bit long double is within about 2e-19). It takes a few double operations per term, fast
// under qemu-user as well, where aarch64's 128-bit long double is computed in software.
struct ReferenceProduct {
  std::vector<double> hi, lo, magnitude;
};

template <typename T>
ReferenceProduct reference_product(const Operand<T>& a, const Operand<T>& b, int64_t rows, int64_t cols,
                                   int64_t inner) {
  ReferenceProduct r;
  r.hi.assign(static_cast<size_t>(rows * cols), 0.0);
  r.lo = r.hi;
  r.magnitude = r.hi;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double hi = 0, lo = 0, magnitude = 0;
      for (int64_t p = 0; p < inner; ++p) {
        const double x = a.at(i, p), y = b.at(p, j), product = x * y;
        magnitude += std::fabs(product);
        if constexpr (std::is_same_v<T, float>) {
          hi += product;
        } else {
          const double sum = hi + product, part = sum - hi;
          lo += (hi - (sum - part)) + (product - part) + std::fma(x, y, -product);
          hi = sum;
        }
      }
      r.hi[i * cols + j] = hi, r.lo[i * cols + j] = lo, r.magnitude[i * cols + j] = magnitude;
    }
  return r;
}

// Runs ag::gemm on one case, accumulating into C or not, at each thread count of `threads` (the pool as it
// is when empty), and checks every element against the reference, within the rounding bound of any
// summation order: |error| <= (inner + 1) u (|c0| + sum |a_ip b_pj|), u the unit roundoff of T. A wrong
// element, a missed term or a stale tile is off by O(1), far above it. The reference, the costly part, is
// computed once for all of them.
template <typename T>
void check_case(int64_t rows, int64_t cols, int64_t inner, bool ta, bool tb, int64_t pad,
                std::initializer_list<bool> accumulates, std::initializer_list<int> threads = {}) {
  const Operand<T> a = make_operand<T>(rows, inner, ta, pad, 11 + rows * 7 + inner);
  const Operand<T> b = make_operand<T>(inner, cols, tb, pad, 13 + cols * 5 + inner);
  const ReferenceProduct ref = reference_product(a, b, rows, cols, inner);
  const int64_t ldc = cols + pad;
  const T c0 = T(0.5);
  const double u = std::numeric_limits<T>::epsilon() / 2;
  const std::vector<int> thread_counts = threads.size() ? std::vector<int>(threads) : std::vector<int>{0};
  for (int thread_count : thread_counts)
    for (bool accumulate : accumulates) {
      if (thread_count > 0) ag::set_num_threads(thread_count);
      std::vector<T> c(static_cast<size_t>(rows * ldc), c0);
      ag::gemm(rows, cols, inner, a.view, b.view, c.data(), ldc, accumulate);
      double worst = 0;  // error / bound
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          if (j >= cols) {  // the padding between rows of C is never written
            BOOST_REQUIRE_EQUAL(c[i * ldc + j], c0);
            continue;
          }
          // hi + lo + c0 as a double-double (TwoSum) when accumulating, then |c - (hi + lo)| with c - hi
          // first: exact when c is near the reference, and rounded relative to the error otherwise.
          double hi = ref.hi[i * cols + j], lo = ref.lo[i * cols + j];
          const double magnitude = ref.magnitude[i * cols + j] + (accumulate ? double(c0) : 0.0);
          if (accumulate) {
            const double sum = hi + c0, part = sum - hi;
            lo += (hi - (sum - part)) + (c0 - part);
            hi = sum;
          }
          const double bound = (inner + 1) * u * magnitude;
          const double err = std::fabs((static_cast<double>(c[i * ldc + j]) - hi) - lo);
          worst = std::max(worst, bound > 0 ? err / bound : err);
        }
      BOOST_TEST(worst <= 1.0, rows << "x" << inner << "x" << cols << " ta " << ta << " tb " << tb << " pad "
                                    << pad << " acc " << accumulate << " threads " << ag::num_threads()
                                    << ": error / rounding bound " << worst);
    }
}

template <typename T>
void check_shapes() {
  const int64_t rows_list[] = {1, 5, 12, 13, 49};
  const int64_t cols_list[] = {1, 4, 7, 8, 16, 33, 65};  // 4 and 8: half a vector (AVX, AVX-512)
  const int64_t inner_list[] = {0, 1, 17, 515};
  for (int64_t rows : rows_list)
    for (int64_t cols : cols_list)
      for (int64_t inner : inner_list)
        for (int t = 0; t < 4; ++t)
          check_case<T>(rows, cols, inner, t & 1, t & 2, (rows + cols) % 3, {(rows + inner + t) % 2 == 1});
}

}  // namespace

// The kernels are vector code for the CPU the library was compiled for: NEON on aarch64 (every aarch64
// CPU has Advanced SIMD; scripts/test --arch aarch64 also finds its fmla in the object), one of the x86
// sets on x86-64, never the compiler's scalar lowering of the vector types.
BOOST_AUTO_TEST_CASE(the_kernels_are_vector_code_for_this_cpu) {
  const std::string isa = ag::gemm_vector_isa();
#if defined(__aarch64__)
  BOOST_TEST(isa == "neon");
#elif defined(__x86_64__)
  BOOST_TEST((isa == "avx512" || isa == "avx2+fma" || isa == "avx" || isa == "sse"), isa);
#endif
  BOOST_TEST(isa != "scalar");
}

BOOST_AUTO_TEST_CASE(float64_matches_the_triple_loop_on_every_blocking_edge) {
  check_shapes<double>();
}

BOOST_AUTO_TEST_CASE(float32_matches_the_triple_loop_on_every_blocking_edge) {
  check_shapes<float>();
}

BOOST_AUTO_TEST_CASE(large_products_split_over_both_threads) {
  // Wide C (split by column slivers; 2100 columns also cross the 2048-column panel) and narrow C (20
  // columns: split by row slivers, each thread packing all of B), at 1 and 2 threads.
  check_case<float>(100, 2100, 40, false, true, 0, {false}, {1, 2});
  check_case<double>(61, 2100, 530, true, false, 3, {true}, {1, 2});
  check_case<float>(3001, 20, 64, false, true, 1, {true}, {1, 2});
  check_case<double>(2999, 16, 70, true, false, 0, {false}, {1, 2});
  // A transposed A whose columns are >= 512 apart, under >= 256 columns of C: packed, not read in place
  // (a weight's gradient at medium's widths), the last sliver cut by the rows.
  check_case<float>(603, 300, 530, true, false, 2, {true}, {1, 2});
  check_case<double>(517, 260, 70, true, false, 0, {false}, {1, 2});
  ag::set_num_threads(1);
}

BOOST_AUTO_TEST_CASE(results_are_the_same_bits_for_any_thread_count) {
  // A wide C (column split), one whose A exceeds 1 MB (column split into wide parts), a tall one two
  // slivers wide with a 16 KB B (row split, for more parts) and a narrow one (row split), all with edges
  // in every direction.
  const int64_t shapes[][3] = {{300, 260, 700}, {600, 300, 520}, {1001, 64, 63}, {2005, 20, 90}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], inner = shape[2];
    const Operand<float> a = make_operand<float>(rows, inner, false, 0, 1);
    const Operand<float> b = make_operand<float>(inner, cols, true, 0, 2);
    std::vector<float> one(rows * cols);
    ag::set_num_threads(1);
    ag::gemm(rows, cols, inner, a.view, b.view, one.data(), cols, false);
    // 2 to 4 threads cut the product into 8 to 16 parts, claimed in whatever order the threads come.
    for (int threads : {2, 3, 4}) {
      std::vector<float> many(rows * cols);
      ag::set_num_threads(threads);
      ag::gemm(rows, cols, inner, a.view, b.view, many.data(), cols, false);
      BOOST_TEST(one == many, rows << "x" << inner << "x" << cols << " at " << threads << " threads");
    }
    ag::set_num_threads(1);
  }
}

BOOST_AUTO_TEST_CASE(a_small_c_over_a_deep_inner_dimension_splits_by_slices_with_the_serial_bits) {
  // Weight gradients (dY^T X: A transposed, the inner dimension the tokens) with a C of at most 64K
  // elements and 2 to 4 slices of the inner dimension, the last one cut short: each slice is summed
  // apart and the slices added in order. Over C's old values too, against the serial product.
  const int64_t shapes[][3] = {{64, 64, 1024}, {70, 250, 1700}, {9, 33, 2049}, {256, 250, 1030}};
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0], cols = shape[1], inner = shape[2];
    for (bool accumulate : {false, true}) {
      const Operand<float> a = make_operand<float>(rows, inner, true, 1, 3);
      const Operand<float> b = make_operand<float>(inner, cols, false, 0, 4);
      std::vector<float> start(rows * cols);
      for (size_t i = 0; i < start.size(); ++i) start[i] = float(i % 7) - 3.0f;
      std::vector<float> one = start;
      ag::set_num_threads(1);
      ag::gemm(rows, cols, inner, a.view, b.view, one.data(), cols, accumulate);
      for (int threads : {2, 3, 4}) {
        std::vector<float> many = start;
        ag::set_num_threads(threads);
        ag::gemm(rows, cols, inner, a.view, b.view, many.data(), cols, accumulate);
        BOOST_TEST(one == many, rows << "x" << inner << "x" << cols << " accumulate " << accumulate << " at "
                                     << threads << " threads");
      }
    }
    ag::set_num_threads(2);
    check_case<float>(rows, cols, inner, true, false, 2, {false, true});
    check_case<double>(rows, cols, inner, true, true, 0, {false, true});
  }
  ag::set_num_threads(1);
}

// C = start + A B (a Linear's residual + bias + x W^T, the start written a tile at a time inside the
// product) gives the bits of writing residual + bias into C and then accumulating A B, on every path: a
// serial product with cut tiles and several slices, a B read in place, a split by slices, by columns
// and by rows (at 1 and 2 threads), an empty inner dimension; with a bias, a residual or both, the
// residual's rows and C's rows spaced differently, and C's padding left alone.
template <typename T>
void check_start(int64_t rows, int64_t cols, int64_t inner, bool ta, bool tb, bool bias_on,
                 bool residual_on) {
  const Operand<T> a = make_operand<T>(rows, inner, ta, 1, 21 + rows);
  const Operand<T> b = make_operand<T>(inner, cols, tb, 0, 22 + cols);
  const Operand<T> bias = make_operand<T>(1, cols, false, 0, 23);
  const Operand<T> residual = make_operand<T>(rows, cols, false, 3, 24);
  const int64_t ldc = cols + 1;
  const T pad = T(7);
  std::vector<T> want(static_cast<size_t>(rows * ldc), pad), got = want;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const T r = residual_on ? residual.at(i, j) : T(0), bj = bias_on ? bias.at(0, j) : T(0);
      want[i * ldc + j] = residual_on && bias_on ? r + bj : residual_on ? r : bj;
    }
  ag::gemm(rows, cols, inner, a.view, b.view, want.data(), ldc, true);
  const ag::CStart<T> start{bias_on ? bias.view.data : nullptr, residual_on ? residual.view.data : nullptr,
                            residual.view.row_stride};
  ag::gemm(rows, cols, inner, a.view, b.view, got.data(), ldc, start);
  BOOST_TEST(want == got, rows << "x" << inner << "x" << cols << " ta " << ta << " tb " << tb << " bias "
                               << bias_on << " residual " << residual_on);
}

BOOST_AUTO_TEST_CASE(a_start_gives_the_bits_of_writing_it_then_accumulating) {
  const int64_t shapes[][5] = {// rows, cols, inner, A transposed, B transposed
                               {5, 7, 17, 0, 1},      {13, 33, 1100, 0, 1},  {9, 16, 40, 0, 0},
                               {70, 250, 1700, 1, 0}, {100, 2100, 40, 0, 1}, {3001, 20, 64, 0, 1},
                               {12, 65, 0, 0, 1}};
  for (int threads : {1, 2}) {
    ag::set_num_threads(threads);
    for (const auto& s : shapes)
      for (int kind = 1; kind < 4; ++kind) {
        check_start<float>(s[0], s[1], s[2], s[3], s[4], kind & 1, kind & 2);
        check_start<double>(s[0], s[1], s[2], s[3], s[4], kind & 1, kind & 2);
      }
  }
  ag::set_num_threads(1);
}

// A product of one row (a decoding step) reads B in place rather than packing it; its row must have the
// bits that the same row gets inside a product of many rows (the packed path), with and without a start,
// accumulating, over several slices of the inner dimension and split over threads.
// The operands of one shape are made once, in float64, and rounded for float32 (cast_operand), for every
// start kind, element type and thread count.
template <typename T>
struct OneRowOperands {
  static constexpr int64_t rows =
      9;  // more than any micro-tile's rows: the packed path, or (B = W^T) W's rows
  Operand<T> a, b, residual, bias;
};

OneRowOperands<double> one_row_operands(int64_t cols, int64_t inner, bool ta, bool tb, int64_t pad) {
  constexpr int64_t rows = OneRowOperands<double>::rows;
  return {make_operand<double>(rows, inner, ta, pad, 17 + cols + inner),
          make_operand<double>(inner, cols, tb, pad, 19 + cols * 3 + inner),
          make_operand<double>(rows, cols, false, 0, 23 + cols),
          make_operand<double>(1, cols, false, 0, 29 + cols)};
}

template <typename T>
OneRowOperands<T> cast_operands(const OneRowOperands<double>& o) {
  return {cast_operand<T>(o.a), cast_operand<T>(o.b), cast_operand<T>(o.residual), cast_operand<T>(o.bias)};
}

template <typename T>
void check_one_row(const OneRowOperands<T>& operands, int64_t cols, int64_t inner, bool ta, bool tb,
                   int64_t pad, int start_kind) {
  constexpr int64_t rows = OneRowOperands<T>::rows;
  const Operand<T>&a = operands.a, &b = operands.b, &residual = operands.residual, &bias = operands.bias;
  ag::CStart<T> start;
  if (start_kind & 1) start.bias = bias.view.data;
  if (start_kind & 2) start = {start.bias, residual.view.data, cols};
  const bool accumulate = start_kind == 4;
  const int64_t ldc = cols + pad;
  std::vector<T> many(static_cast<size_t>(rows * ldc), T(0.25)), one(static_cast<size_t>(ldc), T(0.25));
  const int64_t row = 6;
  if (start_kind == 0 || accumulate) {
    ag::gemm(rows, cols, inner, a.view, b.view, many.data(), ldc, accumulate);
    ag::gemm(int64_t(1), cols, inner,
             ag::MatView<T>{a.view.data + row * a.view.row_stride, a.view.row_stride, a.view.col_stride},
             b.view, one.data(), ldc, accumulate);
  } else {
    ag::gemm(rows, cols, inner, a.view, b.view, many.data(), ldc, start);
    ag::gemm(int64_t(1), cols, inner,
             ag::MatView<T>{a.view.data + row * a.view.row_stride, a.view.row_stride, a.view.col_stride},
             b.view, one.data(), ldc, start.at(row, 0));
  }
  BOOST_TEST(std::memcmp(one.data(), many.data() + row * ldc, sizeof(T) * static_cast<size_t>(ldc)) == 0,
             "1 x " << inner << " x " << cols << " ta " << ta << " tb " << tb << " start " << start_kind
                    << ": bits differ from the same row in a product of " << rows);
}

BOOST_AUTO_TEST_CASE(a_product_of_one_row_has_the_bits_of_that_row_in_a_larger_product) {
  const int64_t shapes[][2] = {{1, 1},    {7, 5},     {16, 8},     {33, 17},
                               {64, 128}, {100, 515}, {3072, 768}, {40, 1100}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t) {
      const int64_t pad = (s[0] + t) % 3;
      const OneRowOperands<double> operands64 = one_row_operands(s[0], s[1], t & 1, t & 2, pad);
      const OneRowOperands<float> operands32 = cast_operands<float>(operands64);
      for (int threads : {1, 2}) {
        ag::set_num_threads(threads);
        for (int start_kind = 0; start_kind < 5; ++start_kind) {
          check_one_row(operands32, s[0], s[1], t & 1, t & 2, pad, start_kind);
          check_one_row(operands64, s[0], s[1], t & 1, t & 2, pad, start_kind);
        }
      }
    }
  ag::set_num_threads(1);
}

// A few rows times B = W^T (a Linear over one sequence) read W's rows in place and pack A^T instead
// (gemm.cpp, gemm_by_weight_rows); every element must have the bits of the packed path, which the same
// rows take inside a product of more than kGemmWeightRowsMaxRows rows: over rows 1 to 40 (and 130 and 200
// by 211 columns over 520: A^T packed over the pool from 2^16 elements, its last sliver cut), columns that
// are no whole number of vectors, inner dimensions of one slice and across the 512-deep slices (and one
// below kGemmWeightRowsMinInner, the packed path on both sides), each kind of start and accumulating.
// As for one row, the operands of one shape are made once (A, W, the residual and the bias).
constexpr int64_t kWeightRowsBig = ag::kGemmWeightRowsMaxRows + 1;

OneRowOperands<double> weight_rows_operands(int64_t cols, int64_t inner) {
  const int64_t pad = cols % 3, ldw = inner + pad, lda = inner + 1;
  return {make_operand<double>(kWeightRowsBig, lda, false, 0, 31 + inner),
          make_operand<double>(cols, ldw, false, 0, 37 + cols + inner),
          make_operand<double>(kWeightRowsBig, cols, false, 0, 41 + cols),
          make_operand<double>(1, cols, false, 0, 43 + cols)};
}

template <typename T>
void check_weight_rows(const OneRowOperands<T>& operands, int64_t cols, int64_t inner, int start_kind,
                       const std::vector<int64_t>& row_counts) {
  constexpr int64_t big = kWeightRowsBig;
  const int64_t pad = cols % 3, ldw = inner + pad, lda = inner + 1, ldc = cols + pad;
  const Operand<T>&a = operands.a, &w = operands.b, &residual = operands.residual, &bias = operands.bias;
  const ag::MatView<T> av{a.view.data, lda, 1}, b{w.view.data, 1, ldw};  // b = W^T
  ag::CStart<T> start;
  if (start_kind & 1) start.bias = bias.view.data;
  if (start_kind & 2) start = {start.bias, residual.view.data, cols};
  const bool accumulate = start_kind == 4;
  const auto product = [&](int64_t rows, std::vector<T>& c) {
    if (start_kind == 0 || accumulate)
      ag::gemm(rows, cols, inner, av, b, c.data(), ldc, accumulate);
    else
      ag::gemm(rows, cols, inner, av, b, c.data(), ldc, start);
  };
  std::vector<T> many(static_cast<size_t>(big * ldc), T(0.25));
  product(big, many);
  for (int64_t rows : row_counts) {
    std::vector<T> few(static_cast<size_t>(rows * ldc), T(0.25));
    product(rows, few);
    BOOST_TEST(std::memcmp(few.data(), many.data(), sizeof(T) * few.size()) == 0,
               rows << " x " << inner << " x " << cols << " start " << start_kind
                    << ": bits differ from the same rows in a product of " << big);
  }
}

BOOST_AUTO_TEST_CASE(few_rows_by_a_transposed_weight_have_the_packed_paths_bits) {
  const auto check = [](int64_t cols, int64_t inner, const std::vector<int64_t>& row_counts) {
    const OneRowOperands<double> operands64 = weight_rows_operands(cols, inner);
    const OneRowOperands<float> operands32 = cast_operands<float>(operands64);
    for (int threads : {1, 2}) {
      ag::set_num_threads(threads);
      for (int start_kind = 0; start_kind < 5; ++start_kind) {
        check_weight_rows(operands32, cols, inner, start_kind, row_counts);
        check_weight_rows(operands64, cols, inner, start_kind, row_counts);
      }
    }
  };
  std::vector<int64_t> few(40);
  std::iota(few.begin(), few.end(), int64_t(1));
  for (int64_t cols : {int64_t(13), int64_t(41), int64_t(67)})
    for (int64_t inner : {int64_t(7), int64_t(300), int64_t(1030)}) check(cols, inner, few);
  check(211, 520, {130, 200});  // A^T large enough to be packed over the pool, its last sliver cut
  ag::set_num_threads(1);
}

// A product of at most 512 multiply-adds (attention's per-head products over a few positions) runs as
// direct loops rather than through padded slivers and scratch tiles (gemm.cpp, gemm_tiny); its rows must
// have the bits that the same rows get inside a product of more rows (the packed path): with A and B
// transposed or not, rows and columns below, at and past a tile's edge, each kind of start and
// accumulating.
template <typename T>
void check_tiny(int64_t rows, int64_t cols, int64_t inner, bool ta, bool tb, int start_kind) {
  constexpr int64_t big = 520;  // over 512 multiply-adds at any shape: the packed path
  const int64_t pad = (rows + cols) % 3, ldc = cols + pad, first = 5;
  const Operand<T> a = make_operand<T>(big, inner, ta, pad, 47 + rows + inner);
  const Operand<T> b = make_operand<T>(inner, cols, tb, pad, 53 + cols + inner);
  const Operand<T> residual = make_operand<T>(big, cols, false, 1, 59 + cols);
  const Operand<T> bias = make_operand<T>(1, cols, false, 0, 61 + cols);
  ag::CStart<T> start;
  if (start_kind & 1) start.bias = bias.view.data;
  if (start_kind & 2) start = {start.bias, residual.view.data, residual.view.row_stride};
  const bool accumulate = start_kind == 4;
  const auto product = [&](int64_t n, int64_t row0, std::vector<T>& c) {
    const ag::MatView<T> an{a.view.data + row0 * a.view.row_stride, a.view.row_stride, a.view.col_stride};
    if (start_kind == 0 || accumulate)
      ag::gemm(n, cols, inner, an, b.view, c.data(), ldc, accumulate);
    else
      ag::gemm(n, cols, inner, an, b.view, c.data(), ldc, start.at(row0, 0));
  };
  std::vector<T> many(static_cast<size_t>(big * ldc), T(0.25)), few(static_cast<size_t>(rows * ldc), T(0.25));
  product(big, 0, many);
  product(rows, first, few);
  BOOST_TEST(std::memcmp(few.data(), many.data() + first * ldc, sizeof(T) * few.size()) == 0,
             rows << " x " << inner << " x " << cols << " ta " << ta << " tb " << tb << " start "
                  << start_kind << ": bits differ from the same rows in a product of " << big);
}

BOOST_AUTO_TEST_CASE(tiny_products_have_the_bits_of_the_same_rows_in_a_packed_product) {
  const int64_t shapes[][3] = {// rows, cols, inner: at most 512 multiply-adds
                               {1, 1, 1},   {1, 3, 32},  {1, 32, 3},  {3, 3, 32}, {3, 32, 1},
                               {3, 32, 3},  {2, 17, 15}, {5, 7, 13},  {8, 8, 8},  {9, 4, 14},
                               {16, 32, 1}, {1, 512, 1}, {1, 1, 512}, {4, 16, 8}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (int start_kind = 0; start_kind < 5; ++start_kind) {
        check_tiny<float>(s[0], s[1], s[2], t & 1, t & 2, start_kind);
        check_tiny<double>(s[0], s[1], s[2], t & 1, t & 2, start_kind);
      }
}

// A one-row product by W^T whose W has a packed copy in use (ag::PackedWeights, as a decoding step reads its
// weights) must have the bits of W read in place: on columns that fill no whole panel, over several slices
// of the inner dimension, with each kind of start and accumulating, on one and two threads. The packed copy
// is what is read: W's storage is overwritten with NaN once packed. Outside the scope, or for a view of W
// of another shape, W is read in place again.
template <typename T>
void check_packed_row(int64_t cols, int64_t inner, int start_kind) {
  const Operand<T> a = make_operand<T>(1, inner, false, 0, 47 + inner);
  Operand<T> w = make_operand<T>(cols, inner, false, 0, 53 + cols + inner);  // dense: rows `inner` apart
  const Operand<T> residual = make_operand<T>(1, cols, false, 0, 59 + cols);
  const Operand<T> bias = make_operand<T>(1, cols, false, 0, 61 + cols);
  const ag::MatView<T> b{w.view.data, 1, inner};  // W^T
  ag::CStart<T> start;
  if (start_kind & 1) start.bias = bias.view.data;
  if (start_kind & 2) start = {start.bias, residual.view.data, cols};
  const bool accumulate = start_kind == 4;
  const auto product = [&](std::vector<T>& c) {
    if (start_kind == 0 || accumulate)
      ag::gemm(int64_t(1), cols, inner, a.view, b, c.data(), cols, accumulate);
    else
      ag::gemm(int64_t(1), cols, inner, a.view, b, c.data(), cols, start);
  };
  std::vector<T> in_place(static_cast<size_t>(cols), T(0.25)), packed(in_place);
  product(in_place);

  ag::PackedWeights<T> weights;
  weights.add(w.view.data, cols, inner);
  const int64_t panel = ag::gemm_packed_panel<T>();
  BOOST_TEST(weights.bytes() == (cols + panel - 1) / panel * panel * inner * int64_t(sizeof(T)));
  weights.add(w.view.data, cols, inner);  // added before: skipped
  BOOST_TEST(weights.bytes() == (cols + panel - 1) / panel * panel * inner * int64_t(sizeof(T)));
  BOOST_CHECK_THROW(weights.add(w.view.data, cols, inner + 1), std::invalid_argument);
  std::fill(w.storage.begin(), w.storage.end(), std::numeric_limits<T>::quiet_NaN());
  {
    const ag::UsePackedWeights<T> use(&weights);
    product(packed);
    BOOST_TEST(std::memcmp(packed.data(), in_place.data(), sizeof(T) * in_place.size()) == 0,
               "1 x " << inner << " x " << cols << " start " << start_kind
                      << ": the packed copy's bits differ from W's in place");
    {
      const ag::UsePackedWeights<T> none(nullptr);  // nested: no packed copy, W (now NaN) read in place
      std::vector<T> c(in_place.size(), T(0.25));
      product(c);
      BOOST_TEST(std::isnan(c[0]));
    }
    if (cols > 1) {  // W's first cols - 1 rows: a matrix of another shape, read in place
      std::vector<T> c(in_place.size(), T(0.25));
      ag::gemm(int64_t(1), cols - 1, inner, a.view, b, c.data(), cols, false);
      BOOST_TEST(std::isnan(c[0]));
    }
  }
  std::vector<T> after(in_place.size(), T(0.25));
  product(after);
  BOOST_TEST(std::isnan(after[0]));  // the scope has ended
}

BOOST_AUTO_TEST_CASE(a_one_row_product_by_a_packed_weight_has_the_bits_of_the_weight_in_place) {
  const int64_t shapes[][2] = {{1, 1},     {7, 5},     {16, 8},     {33, 17},   {64, 128},
                               {100, 515}, {768, 768}, {3072, 768}, {40, 1100}, {50257 % 1000, 1536}};
  for (int threads : {1, 2}) {
    ag::set_num_threads(threads);
    for (const auto& s : shapes)
      for (int start_kind = 0; start_kind < 5; ++start_kind) {
        check_packed_row<float>(s[0], s[1], start_kind);
        check_packed_row<double>(s[0], s[1], start_kind);
      }
  }
  ag::set_num_threads(1);
}

// The threads of this process, from /proc/self/task.
int live_threads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// The thread count once it settles at `expected`, or what it is after 10 s. A joined thread can still be
// listed for a moment: join returns when the thread has cleared its id, before the kernel (or qemu-user's
// host thread, which exits after the guest's) has removed it from /proc/self/task.
int live_threads_settled(int expected) {
  int n = live_threads();
  for (int i = 0; i < 1000 && n != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = live_threads();
  }
  return n;
}

// The thread count once two readings 50 ms apart agree (threads joined by earlier tests may still be listed).
int live_threads_steady() {
  int n = live_threads();
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int next = live_threads();
    if (next == n) break;
    n = next;
  }
  return n;
}

void refuse_third_worker(int index) {
  if (index == 3) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
}

BOOST_AUTO_TEST_CASE(a_worker_that_cannot_start_stops_the_pool_cleanly) {
  // Workers 1 and 2 start, the third is refused: those two are joined (no thread left behind, no hang,
  // no terminate), the error names the failure, and the thread count and the pool stay as they were.
  ag::set_num_threads(2);  // a pool with one worker
  const int before = live_threads_steady();
  ag::detail::set_worker_start_hook(refuse_third_worker);
  try {
    ag::set_num_threads(6);
    BOOST_FAIL("set_num_threads(6) did not throw");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("could not start worker thread 3 of 5 for 6 threads") != std::string::npos, what);
  }
  ag::detail::set_worker_start_hook(nullptr);
  BOOST_TEST(ag::num_threads() == 2);
  BOOST_TEST(live_threads_settled(before) == before);
  // The pool still works afterwards.
  ag::set_num_threads(3);
  std::vector<std::atomic<int>> hits(100);
  ag::parallel_for(100, ag::kParallelMinWork, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (auto& h : hits) BOOST_TEST(h.load() == 1);
  // The 2-thread pool's worker replaced by the 3-thread pool's two.
  BOOST_TEST(live_threads_settled(before + 1) == before + 1);
  ag::set_num_threads(1);
}

BOOST_AUTO_TEST_CASE(pool_runs_every_index_once_across_jobs_of_changing_sizes) {
  // Jobs of different sizes back to back: a worker leaving one job must not run a chunk of the next one
  // with the old chunk count (a race that once hung the pool).
  ag::set_num_threads(2);
  std::vector<std::atomic<int>> hits(64);
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = 1 + (job * 7) % 40;
    for (int64_t i = 0; i < n; ++i) hits[i].store(0);
    ag::parallel_for(n, ag::kParallelMinWork, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i)
      BOOST_REQUIRE_MESSAGE(hits[i].load() == 1, "job " << job << " index " << i);
  }
  ag::set_num_threads(1);
}
