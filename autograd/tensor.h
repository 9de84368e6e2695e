// Tensor: an N-d (up to 4-d), row-major, contiguous buffer with an optional gradient and the graph edge
// that produced it. This file holds the data structure, the backward pass and the no-grad scope; the ops
// live in ops.h. Dimensions are in PyTorch order: (batch, heads, seq, features).
//
// A Tensor is a cheap handle (a shared_ptr to a Node); copying it shares the data, as in PyTorch.
// T is float for training and double for gradient checks; both are explicitly instantiated in tensor.cpp.
#pragma once

#include <Eigen/Core>
#include <Eigen/StdVector>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ag {

using Shape = std::vector<int64_t>;

namespace detail {
// Tensor storage blocks: 64-byte aligned, recycled by exact size (see tensor.cpp).
void* storage_allocate(size_t bytes);
void storage_free(void* p, size_t bytes) noexcept;
// Bytes of tensor storage in use now (allocated and not yet freed; blocks cached for reuse are not counted),
// so a test can see what a graph keeps alive.
int64_t storage_live_bytes();
}  // namespace detail

// The allocator of tensor storage. Aligned to the widest SIMD width Eigen uses (64 bytes with AVX-512):
// Eigen peels the unaligned head of a buffer differently depending on its address, which changes
// summation order, so with every buffer aligned results depend only on the data and shapes, never on
// where memory came from. Blocks are recycled: a training step allocates the same sizes as the step before,
// and gets them back without a trip to malloc (or mmap and page faults for large ones). resize() leaves new
// elements uninitialised (every op writes its whole output); assign() and zeros() fill as usual.
template <typename T>
struct StorageAllocator {
  using value_type = T;
  StorageAllocator() = default;
  template <typename U>
  StorageAllocator(const StorageAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(detail::storage_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { detail::storage_free(p, n * sizeof(T)); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zero fill
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const StorageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const StorageAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using Buffer = std::vector<T, StorageAllocator<T>>;

int64_t numel_of(const Shape& shape);
std::string shape_str(const Shape& shape);

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using VecMap = Eigen::Map<Vec<T>>;
template <typename T>
using MatMap = Eigen::Map<Mat<T>>;
template <typename T>
using ConstVecMap = Eigen::Map<const Vec<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const Mat<T>>;
template <typename T>
using ConstRowMap = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;

// One value in the graph. Ops fill `inputs` and `backward`; backward() calls `backward(node)` once the
// node's grad is complete, and the closure adds into its inputs' grads (always +=, so a tensor used twice
// receives the sum).
template <typename T>
struct Node {
  Shape shape;
  Buffer<T> value;
  Buffer<T> grad;  // empty until something flows into it
  bool requires_grad = false;
  bool retain_grad = false;  // an interior node that keeps its gradient after backward (Tensor::retain_grad)
  const char* op = "leaf";
  std::vector<std::shared_ptr<Node>> inputs;
  std::function<void(Node&)> backward;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Unlinks the graph iteratively: a chain of 100,000 nodes would overflow the stack by recursive release.
  ~Node();

  int64_t numel() const { return static_cast<int64_t>(value.size()); }
  // The gradient buffer, zero-filled on first use. (Ops write gradients through detail::Grad below.)
  T* grad_buffer();
  // The gradient buffer for a backward that writes every element: on first use it is left uninitialised
  // and `fresh` is set, and the caller must assign (=) rather than add (+=); otherwise `fresh` is false.
  // Assigning v gives the bits of 0 + v except for v = -0, so gradients do not change.
  T* grad_buffer_for_write(bool& fresh);
};

namespace detail {

// How a backward writes into the gradient of one of its inputs. A backward that puts every element once
// takes kOnce: the first write into a buffer (nothing flowed in yet) assigns, so the buffer is never
// zero-filled first, and later writes (an input used twice, or by two ops) add. A backward that sums
// several contributions into an element (a broadcast input, a scatter) takes kSum: zeros on first use,
// and every write adds.
enum class GradWrites { kOnce, kSum };

// One input's gradient, for an op's backward:
//   detail::Grad<T> dx(*n.inputs[0]);         // empty (false) if that input needs no gradient
//   if (dx) dx.put(offset, len, expr);        // elements [offset, offset + len) = expr, or += expr
// Acquire each input's Grad just before writing it, in the order of the writes, so that when two inputs
// are one node the first write assigns and the second adds.
template <typename T>
class Grad {
 public:
  explicit Grad(Node<T>& in, GradWrites writes = GradWrites::kOnce) {
    if (!in.requires_grad) return;
    if (writes == GradWrites::kSum) {
      data_ = in.grad_buffer();
    } else {
      bool fresh = false;
      data_ = in.grad_buffer_for_write(fresh);
      adds_ = !fresh;
    }
  }
  explicit operator bool() const { return data_ != nullptr; }
  T* data() const { return data_; }
  // Whether writes add (+=) rather than assign: the flag for kernels that take one (gemm's accumulate).
  bool adds() const { return adds_; }
  // dst = src or dst += src; dst is an Eigen view into data() (a VecMap, a rowwise() of a MatMap, ...).
  template <typename Dst, typename Src>
  void put(Dst&& dst, const Src& src) const {
    if (adds_)
      dst += src;
    else
      dst = src;
  }
  template <typename Src>
  void put(int64_t offset, int64_t len, const Src& src) const {
    put(VecMap<T>(data_ + offset, len), src);
  }
  // Elements [offset, offset + len) receive no gradient (under kOnce they must still be written: zeros).
  void zero(int64_t offset, int64_t len) const {
    if (!adds_) VecMap<T>(data_ + offset, len).setZero();
  }

 private:
  T* data_ = nullptr;
  bool adds_ = true;
};

}  // namespace detail

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<Node<T>> node) : node_(std::move(node)) {}

  // Factories. Values are uninitialised for empty(), copied for from().
  static Tensor empty(const Shape& shape, bool requires_grad = false);
  static Tensor zeros(const Shape& shape, bool requires_grad = false);
  static Tensor full(const Shape& shape, T value, bool requires_grad = false);
  static Tensor from(const Shape& shape, std::vector<T> values, bool requires_grad = false);
  static Tensor scalar(T value, bool requires_grad = false) { return from({}, {value}, requires_grad); }

  // Accessors that return a reference or a view into the tensor are for named tensors only: on a temporary
  // (`f().values()`), which may hold the last reference to its storage, the reference would dangle as soon
  // as the statement ends (a range-for over it reads freed memory). There, shape(), values() and node_ptr()
  // return copies (set_requires_grad() a new handle, not a reference), and data(), vec(), mat(), grad()
  // and node() do not compile.
  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const& { return node_->shape; }
  Shape shape() && { return node_->shape; }
  int64_t dim() const { return static_cast<int64_t>(node_->shape.size()); }
  // Size of dimension d; negative d counts from the end.
  int64_t size(int64_t d) const;
  int64_t numel() const { return node_->numel(); }

  T* data() & { return node_->value.data(); }
  const T* data() const& { return node_->value.data(); }
  T* data() && = delete;
  Buffer<T>& values() & { return node_->value; }
  const Buffer<T>& values() const& { return node_->value; }
  Buffer<T> values() && { return node_->value; }
  // The values as a plain vector (a copy), e.g. for JSON and checkpoints.
  std::vector<T> to_vector() const { return std::vector<T>(node_->value.begin(), node_->value.end()); }
  // Replaces the values with as many from `values` (which must hold numel() of them).
  void assign(const std::vector<T>& values);
  T item() const;  // the value of a one-element tensor

  bool requires_grad() const { return node_->requires_grad; }
  Tensor& set_requires_grad(bool on = true) &;
  Tensor set_requires_grad(bool on = true) && { return set_requires_grad(on); }
  bool has_grad() const { return !node_->grad.empty(); }
  // The gradient (zeros if nothing flowed in yet), allocated on first use.
  T* grad() & { return node_->grad_buffer(); }
  T* grad() && = delete;
  Tensor grad_tensor() const;  // a copy of the gradient as a tensor without a graph
  void zero_grad();            // frees the gradient buffer; the next backward starts from zero
  // Keeps this tensor's gradient after backward() although it is computed by an op (an interior node's
  // gradient is otherwise freed as the pass goes), as PyTorch's retain_grad.
  void retain_grad() { node_->retain_grad = true; }

  // A new tensor sharing nothing with the graph: same values (copied), no history, no grad.
  Tensor detach() const;
  Tensor clone() const { return detach(); }

  // Reverse-mode pass from this tensor. With no argument the tensor must hold one element and is seeded
  // with 1. Afterwards the graph below this tensor is released (inputs and closures dropped).
  void backward();
  void backward(const std::vector<T>& seed) { backward(seed.data(), seed.size()); }
  void backward(const T* seed, size_t n);

  // Eigen views over the buffer.
  VecMap<T> vec() & { return VecMap<T>(data(), numel()); }
  ConstVecMap<T> vec() const& { return ConstVecMap<T>(data(), numel()); }
  VecMap<T> vec() && = delete;
  // The buffer as a rows x cols matrix, rows = product of all dims but the last.
  MatMap<T> mat() &;
  ConstMatMap<T> mat() const&;
  MatMap<T> mat() && = delete;

  Node<T>* node() const& { return node_.get(); }
  Node<T>* node() && = delete;
  const std::shared_ptr<Node<T>>& node_ptr() const& { return node_; }
  std::shared_ptr<Node<T>> node_ptr() && { return node_; }

 private:
  std::shared_ptr<Node<T>> node_;
};

// Recording: inside a NoGradScope, ops build no graph (outputs never require grad). Scopes nest.
class NoGradScope {
 public:
  NoGradScope();
  ~NoGradScope();
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// For op implementations: whether an op with these inputs records a graph edge, and attaching it.
template <typename T>
bool needs_grad(std::initializer_list<const Tensor<T>*> inputs);
// (The inputs and closure are non-deduced contexts, so braced lists and lambdas convert; T comes from out.)
template <typename U>
struct NoDeduce {
  using type = U;
};
template <typename T>
void attach(Tensor<T>& out, const char* op,
            typename NoDeduce<std::vector<std::shared_ptr<Node<T>>>>::type inputs,
            typename NoDeduce<std::function<void(Node<T>&)>>::type backward);

extern template class Tensor<float>;
extern template class Tensor<double>;
extern template struct Node<float>;
extern template struct Node<double>;

}  // namespace ag
