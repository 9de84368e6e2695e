// Tensor storage, the backward pass (iterative topological sort), and the no-grad scope.
#include "autograd/tensor.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ag {

namespace {
thread_local bool g_grad_enabled = true;

// Freed storage blocks by size, for reuse, up to a bound, so a one-off large tensor does not stay cached
// forever. Not locked: see StorageCache and LocalStorageCache.
class SizeBins {
 public:
  explicit SizeBins(size_t max_bytes) : max_bytes_(max_bytes) {}
  void* take(size_t bytes) {
    auto it = free_.find(bytes);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= bytes;
    return p;
  }
  bool give(void* p, size_t bytes) {
    if (cached_ + bytes > max_bytes_) return false;
    free_[bytes].push_back(p);
    cached_ += bytes;
    return true;
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [bytes, blocks] : free_)
      for (void* p : blocks) f(p, bytes);
  }

 private:
  size_t max_bytes_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

// The blocks every thread shares, behind a lock. Heap-allocated and never destroyed, so tensors in static
// objects can still free into it at exit.
class StorageCache {
 public:
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    return bins_.take(bytes);
  }
  bool give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    return bins_.give(p, bytes);
  }

 private:
  std::mutex mutex_;
  SizeBins bins_{size_t(1) << 30};
};

StorageCache& storage_cache() {
  static StorageCache* cache = new StorageCache;
  return *cache;
}

// Each thread first reuses the blocks it freed itself (up to 64 MB of them), then the shared ones. Two
// threads that allocate the same sizes (the shards of a batch, train/batch_shards.h) would otherwise swap
// blocks through the shared cache every step, each writing into lines the other core holds, which slows
// a step of small tensors (tiny's, in two shards) noticeably. A thread's
// blocks go to the shared cache when it ends; after that (a static tensor freed at exit) frees go there
// directly.
class LocalStorageCache {
 public:
  static SizeBins* get() { return alive_ ? &instance_.bins_ : nullptr; }
  ~LocalStorageCache() {
    alive_ = false;
    bins_.for_each([](void* p, size_t bytes) {
      if (!storage_cache().give(p, bytes)) std::free(p);
    });
  }

 private:
  static thread_local bool alive_;
  static thread_local LocalStorageCache instance_;
  SizeBins bins_{size_t(64) << 20};
};
thread_local bool LocalStorageCache::alive_ = true;
thread_local LocalStorageCache LocalStorageCache::instance_;

constexpr size_t kStorageAlign = 64;
// A new storage at least this large is placed on 2 MB boundaries and offered transparent huge pages
// (madvise; the kernel's default mode is to use them only where asked): its first touch then faults 2 MB
// at a time instead of 4 KB, which matters where a fault is expensive (a VM) and a forward's outputs
// (GPT-2 small's logits: 128 x 50257 floats) or a loaded model's weights are written fresh.
constexpr size_t kHugeStorageBytes = size_t(4) << 20;
constexpr size_t kHugePageBytes = size_t(2) << 20;

std::atomic<int64_t> g_live_bytes{0};

}  // namespace

namespace detail {

void* storage_allocate(size_t bytes) {
  g_live_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (SizeBins* local = LocalStorageCache::get())
    if (void* p = local->take(bytes)) return p;
  if (void* p = storage_cache().take(bytes)) return p;
  // aligned_alloc wants a multiple of the alignment.
  const size_t align = bytes >= kHugeStorageBytes ? kHugePageBytes : kStorageAlign;
  const size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p && align == kHugePageBytes) madvise(p, size, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  if (!p) {
    g_live_bytes.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  return p;
}

void storage_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  g_live_bytes.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  bool cached = false;
  try {
    SizeBins* local = LocalStorageCache::get();
    cached = (local && local->give(p, bytes)) || storage_cache().give(p, bytes);
  } catch (...) {
  }
  if (!cached) std::free(p);
}

int64_t storage_live_bytes() {
  return g_live_bytes.load(std::memory_order_relaxed);
}

}  // namespace detail

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

NoGradScope::NoGradScope() : previous_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradScope::~NoGradScope() {
  g_grad_enabled = previous_;
}
bool grad_enabled() {
  return g_grad_enabled;
}

template <typename T>
Node<T>::~Node() {
  // Take over the inputs that only we keep alive, and release them from a local stack.
  std::vector<std::shared_ptr<Node>> pending = std::move(inputs);
  backward = nullptr;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    if (n && n.use_count() == 1) {
      for (auto& in : n->inputs) pending.push_back(std::move(in));
      n->inputs.clear();
      n->backward = nullptr;
    }
  }
}

template <typename T>
T* Node<T>::grad_buffer() {
  if (grad.empty()) grad.assign(value.size(), T(0));
  return grad.data();
}

template <typename T>
T* Node<T>::grad_buffer_for_write(bool& fresh) {
  fresh = grad.empty();
  if (fresh) grad.resize(value.size());
  return grad.data();
}

template <typename T>
Tensor<T> Tensor<T>::empty(const Shape& shape, bool requires_grad) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in shape " + shape_str(shape));
  if (shape.size() > 4) throw std::invalid_argument("Tensor: at most 4 dims, got " + shape_str(shape));
  auto node = std::make_shared<Node<T>>();
  node->shape = shape;
  node->value.resize(static_cast<size_t>(numel_of(shape)));
  node->requires_grad = requires_grad;
  return Tensor(std::move(node));
}

template <typename T>
Tensor<T> Tensor<T>::zeros(const Shape& shape, bool requires_grad) {
  return full(shape, T(0), requires_grad);
}

template <typename T>
Tensor<T> Tensor<T>::full(const Shape& shape, T value, bool requires_grad) {
  Tensor t = empty(shape, requires_grad);
  std::fill(t.node_->value.begin(), t.node_->value.end(), value);
  return t;
}

template <typename T>
Tensor<T> Tensor<T>::from(const Shape& shape, std::vector<T> values, bool requires_grad) {
  if (static_cast<int64_t>(values.size()) != numel_of(shape))
    throw std::invalid_argument("Tensor::from: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, requires_grad);
  std::copy(values.begin(), values.end(), t.node_->value.begin());
  return t;
}

template <typename T>
void Tensor<T>::assign(const std::vector<T>& values) {
  if (static_cast<int64_t>(values.size()) != numel())
    throw std::invalid_argument("Tensor::assign: " + std::to_string(values.size()) + " values for shape " +
                                shape_str(shape()));
  std::copy(values.begin(), values.end(), node_->value.begin());
}

template <typename T>
int64_t Tensor<T>::size(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  if (d < 0 || d >= n)
    throw std::out_of_range("Tensor::size: dim " + std::to_string(d) + " out of range for shape " +
                            shape_str(shape()));
  return node_->shape[d];
}

template <typename T>
T Tensor<T>::item() const {
  if (numel() != 1)
    throw std::invalid_argument("Tensor::item: shape " + shape_str(shape()) + " is not one value");
  return node_->value[0];
}

template <typename T>
Tensor<T>& Tensor<T>::set_requires_grad(bool on) & {
  node_->requires_grad = on;
  return *this;
}

template <typename T>
Tensor<T> Tensor<T>::grad_tensor() const {
  Tensor g = zeros(shape());
  if (!node_->grad.empty()) g.node_->value = node_->grad;
  return g;
}

template <typename T>
void Tensor<T>::zero_grad() {
  node_->grad.clear();
  node_->grad.shrink_to_fit();
}

template <typename T>
Tensor<T> Tensor<T>::detach() const {
  Tensor t = empty(shape());
  t.node_->value = node_->value;
  return t;
}

template <typename T>
MatMap<T> Tensor<T>::mat() & {
  const int64_t cols = dim() == 0 ? 1 : shape().back();
  return MatMap<T>(data(), cols == 0 ? 0 : numel() / cols, cols);
}

template <typename T>
ConstMatMap<T> Tensor<T>::mat() const& {
  const int64_t cols = dim() == 0 ? 1 : shape().back();
  return ConstMatMap<T>(data(), cols == 0 ? 0 : numel() / cols, cols);
}

template <typename T>
void Tensor<T>::backward() {
  if (numel() != 1)
    throw std::invalid_argument("backward: needs a one-element tensor (got shape " + shape_str(shape()) +
                                "); pass a seed gradient instead");
  backward(std::vector<T>{T(1)});
}

template <typename T>
void Tensor<T>::backward(const T* seed, size_t n) {
  if (static_cast<int64_t>(n) != numel())
    throw std::invalid_argument("backward: seed of " + std::to_string(n) + " values for shape " +
                                shape_str(shape()));
  if (!node_->requires_grad) throw std::logic_error("backward: tensor does not require grad");

  // Post-order DFS with an explicit stack: every node comes after all of its inputs. `order` owns its nodes,
  // so that each outlives the release of its consumers' edges below.
  std::vector<std::shared_ptr<Node<T>>> order;
  std::unordered_set<Node<T>*> visited;
  std::vector<std::pair<std::shared_ptr<Node<T>>, size_t>> stack;
  stack.emplace_back(node_, 0);
  visited.insert(node_.get());
  while (!stack.empty()) {
    Node<T>* n = stack.back().first.get();
    size_t& next_input = stack.back().second;
    if (next_input < n->inputs.size()) {
      std::shared_ptr<Node<T>> in = n->inputs[next_input++];
      if (in->requires_grad && visited.insert(in.get()).second) stack.emplace_back(std::move(in), 0);
    } else {
      order.push_back(std::move(stack.back().first));
      stack.pop_back();
    }
  }

  T* g = node_->grad_buffer();
  for (size_t i = 0; i < n; ++i) g[i] += seed[i];
  // In reverse post-order every consumer of a node has run before the node. Once the node's own backward has
  // run, its gradient, its closure (with the tensors it saved) and its edges are done with: release them at
  // once, so that activations and their gradients are freed as the pass goes rather than all at its end
  // (this lowers the peak memory of a training step). Interior nodes end without a grad unless they
  // retain it; leaves keep theirs.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node<T>* n = it->get();
    if (n->backward) {
      if (!n->grad.empty()) n->backward(*n);
      n->backward = nullptr;
      n->inputs.clear();
      if (n != node_.get() && !n->retain_grad) n->grad = {};
    }
    it->reset();
  }
}

template <typename T>
bool needs_grad(std::initializer_list<const Tensor<T>*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor<T>* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

template <typename T>
void attach(Tensor<T>& out, const char* op,
            typename NoDeduce<std::vector<std::shared_ptr<Node<T>>>>::type inputs,
            typename NoDeduce<std::function<void(Node<T>&)>>::type backward) {
  Node<T>* n = out.node();
  n->requires_grad = true;
  n->op = op;
  n->inputs = std::move(inputs);
  n->backward = std::move(backward);
}

template struct Node<float>;
template struct Node<double>;
template class Tensor<float>;
template class Tensor<double>;
template bool needs_grad<float>(std::initializer_list<const Tensor<float>*>);
template bool needs_grad<double>(std::initializer_list<const Tensor<double>*>);
template void attach<float>(Tensor<float>&, const char*, std::vector<std::shared_ptr<Node<float>>>,
                            std::function<void(Node<float>&)>);
template void attach<double>(Tensor<double>&, const char*, std::vector<std::shared_ptr<Node<double>>>,
                             std::function<void(Node<double>&)>);

}  // namespace ag
