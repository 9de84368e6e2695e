// Column sums over the rows of a rows x cols matrix, split so that the bits depend on the shapes alone
// and each thread reads the rows it wrote in the ops before: for the gradients of parameters broadcast
// over rows (a Linear's bias, LayerNorm's weight and bias). Internal to autograd/.
#pragma once

#include <algorithm>
#include <cstdint>

#include "autograd/tensor.h"
#include "autograd/threads.h"

namespace ag::detail {

// Rows go in blocks of kRows. For each block, `count` sums of cols elements start at zero and
// add_row(r, sums) adds row r's terms to them, row by row, the blocks in parallel (the split follows the
// rows each thread owns, threads.h); then put_block(sums) is called for each block in order, on the
// calling thread. work_per_element weighs the job for parallel_for. Splitting by columns instead had
// every thread read every row.
template <typename T, typename AddRow, typename PutBlock>
void sum_row_blocks(int64_t rows, int64_t cols, int count, int64_t work_per_element, AddRow&& add_row,
                    PutBlock&& put_block) {
  constexpr int64_t kRows = 128;
  const int64_t blocks = (rows + kRows - 1) / kRows, block_size = count * cols;
  thread_local Buffer<T> sums_buffer;
  if (static_cast<int64_t>(sums_buffer.size()) < blocks * block_size) sums_buffer.resize(blocks * block_size);
  T* sums = sums_buffer.data();
  parallel_for(blocks, work_per_element * rows * cols, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* block = sums + b * block_size;
      std::fill(block, block + block_size, T(0));
      for (int64_t r = b * kRows; r < std::min(rows, (b + 1) * kRows); ++r) add_row(r, block);
    }
  });
  for (int64_t b = 0; b < blocks; ++b) put_block(static_cast<const T*>(sums + b * block_size));
}

}  // namespace ag::detail
