// The engine itself: backward order and accumulation, no-grad, graph release, deep chains, detach.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <type_traits>
#include <utility>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"

using ag::Tensor;
using T = Tensor<double>;

BOOST_AUTO_TEST_CASE(tensor_used_twice_gets_the_sum_of_both_gradients) {
  T x = T::from({3}, {1.0, 2.0, 3.0}, true);
  T y = ag::sum(ag::mul(x, x));  // d/dx sum(x^2) = 2x, through both uses of x
  y.backward();
  BOOST_TEST(x.grad_tensor().values() == std::vector<double>({2.0, 4.0, 6.0}),
             boost::test_tools::per_element());
}

// A temporary tensor may hold the last reference to its storage, so accessors that would return a reference
// or view into it either copy (shape, values, node_ptr) or do not compile (data, vec, mat, grad, node).
template <typename X, typename = void>
struct HasRvalueData : std::false_type {};
template <typename X>
struct HasRvalueData<X, std::void_t<decltype(std::declval<X>().data())>> : std::true_type {};
template <typename X, typename = void>
struct HasRvalueVec : std::false_type {};
template <typename X>
struct HasRvalueVec<X, std::void_t<decltype(std::declval<X>().vec())>> : std::true_type {};
static_assert(!HasRvalueData<T>::value && HasRvalueData<T&>::value && HasRvalueData<const T&>::value);
static_assert(!HasRvalueVec<T>::value && HasRvalueVec<T&>::value);
static_assert(std::is_same_v<decltype(std::declval<T>().values()), ag::Buffer<double>>);
static_assert(std::is_same_v<decltype(std::declval<T>().shape()), ag::Shape>);
static_assert(std::is_same_v<decltype(std::declval<T&>().values()), ag::Buffer<double>&>);
static_assert(std::is_same_v<decltype(std::declval<T>().set_requires_grad()), T>);

BOOST_AUTO_TEST_CASE(a_range_for_over_a_temporary_tensors_values_reads_a_copy) {
  T x = T::from({3}, {1.0, 2.0, 3.0}, true);
  ag::sum(ag::scale(x, 2.0)).backward();
  double total = 0;
  for (double g : x.grad_tensor().values()) total += g;  // grad_tensor() is the only owner of its buffer
  BOOST_TEST(total == 6.0);
}

BOOST_AUTO_TEST_CASE(gradients_accumulate_across_backward_calls_until_zero_grad) {
  T x = T::from({2}, {1.0, -1.0}, true);
  ag::sum(ag::scale(x, 3.0)).backward();
  ag::sum(ag::scale(x, 3.0)).backward();
  BOOST_TEST(x.grad()[0] == 6.0);
  x.zero_grad();
  BOOST_TEST(!x.has_grad());
  ag::sum(x).backward();
  BOOST_TEST(x.grad()[1] == 1.0);
}

BOOST_AUTO_TEST_CASE(nothing_is_recorded_under_no_grad) {
  T x = T::from({2}, {1.0, 2.0}, true);
  T y;
  {
    ag::NoGradScope no_grad;
    BOOST_TEST(!ag::grad_enabled());
    y = ag::mul(x, x);
    { ag::NoGradScope nested; }
    BOOST_TEST(!ag::grad_enabled());  // nesting restores the outer state, not "on"
  }
  BOOST_TEST(ag::grad_enabled());
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(y.node()->inputs.empty());
  BOOST_TEST(!y.node()->backward);
}

BOOST_AUTO_TEST_CASE(a_chain_of_100000_nodes_backpropagates_without_overflowing_the_stack) {
  T x = T::from({1}, {0.5}, true);
  T y = x;
  for (int i = 0; i < 100000; ++i) y = ag::add_scalar(y, 1e-6);
  ag::sum(y).backward();
  BOOST_TEST(x.grad()[0] == 1.0);
  BOOST_TEST(y.item() == 0.5 + 0.1, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(an_unused_chain_of_100000_nodes_is_freed_without_overflowing_the_stack) {
  T x = T::from({1}, {0.5}, true);
  {
    T y = x;
    for (int i = 0; i < 100000; ++i) y = ag::add_scalar(y, 1.0);
  }  // dropped without backward: the destructor unlinks iteratively
  BOOST_TEST(x.node_ptr().use_count() == 1);
}

BOOST_AUTO_TEST_CASE(backward_releases_the_graph) {
  T x = T::from({2}, {1.0, 2.0}, true);
  T h = ag::exp(x);
  T y = ag::sum(h);
  y.backward();
  BOOST_TEST(y.node()->inputs.empty());
  BOOST_TEST(h.node()->inputs.empty());
  BOOST_TEST(!h.node()->backward);
  BOOST_TEST(x.node_ptr().use_count() == 1);  // only our handle keeps the leaf alive now
}

BOOST_AUTO_TEST_CASE(retain_grad_keeps_an_interior_gradient) {
  T x = T::from({3}, {1.0, 2.0, 3.0}, true);
  T h = ag::mul(x, x), other = ag::scale(x, 2.0);
  h.retain_grad();
  ag::sum(ag::add(ag::mul(h, x), other)).backward();  // d/dh = x; d/dx = 2x^2 + x^2 + 2
  BOOST_TEST(h.has_grad());
  BOOST_TEST(!other.has_grad());  // interior, not retained: freed as the pass goes
  BOOST_TEST(h.grad_tensor().values() == std::vector<double>({1.0, 2.0, 3.0}),
             boost::test_tools::per_element());
  BOOST_TEST(x.grad_tensor().values() == std::vector<double>({5.0, 14.0, 29.0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(detach_copies_values_and_drops_history) {
  T x = T::from({2}, {1.0, 2.0}, true);
  T y = ag::scale(x, 2.0);
  T d = y.detach();
  BOOST_TEST(!d.requires_grad());
  BOOST_TEST(d.values() == std::vector<double>({2.0, 4.0}), boost::test_tools::per_element());
  d.data()[0] = 100.0;
  BOOST_TEST(y.data()[0] == 2.0);
}

BOOST_AUTO_TEST_CASE(backward_needs_a_scalar_or_a_seed) {
  T x = T::from({2}, {1.0, 2.0}, true);
  T y = ag::scale(x, 2.0);
  BOOST_CHECK_THROW(y.backward(), std::invalid_argument);
  y.backward(std::vector<double>{1.0, 10.0});
  BOOST_TEST(x.grad()[1] == 20.0);
}

BOOST_AUTO_TEST_CASE(factories_validate_their_shapes) {
  BOOST_CHECK_THROW(T::from({2, 2}, {1.0, 2.0, 3.0}), std::invalid_argument);
  BOOST_CHECK_THROW(T::zeros({1, 1, 1, 1, 1}), std::invalid_argument);
  BOOST_TEST(T::zeros({2, 0}).numel() == 0);
}

namespace user {
// An op written outside the library exactly as ops.h's "How to add an op" shows.
template <typename T>
Tensor<T> square(const Tensor<T>& x) {
  Tensor<T> y = Tensor<T>::empty(x.shape());
  y.vec() = x.vec().square();
  if (ag::needs_grad<T>({&x}))
    ag::attach(y, "square", {x.node_ptr()}, [](ag::Node<T>& n) {
      const ag::detail::Grad<T> dx(*n.inputs[0]);
      if (!dx) return;
      ag::ConstVecMap<T> xv(n.inputs[0]->value.data(), n.numel()), dy(n.grad.data(), n.numel());
      dx.put(0, n.numel(), T(2) * xv * dy);
    });
  return y;
}
}  // namespace user

BOOST_AUTO_TEST_CASE(an_op_written_by_the_recipe_in_ops_h_gets_correct_gradients) {
  T x = T::from({3}, {0.5, -1.5, 2.0}, true);
  const ag::GradcheckResult r =
      ag::gradcheck([](const std::vector<T>& in) { return user::square(in[0]); }, {x});
  BOOST_TEST(r.worst() < 1e-9);
  // z is used three times: the first write into its gradient assigns, the others add. d/dz = 4z + 1.
  T z = T::from({3}, {0.5, -1.5, 2.0}, true);
  ag::sum(ag::add(ag::add(user::square(z), user::square(z)), z)).backward();
  BOOST_TEST(z.grad_tensor().values() == std::vector<double>({3.0, -5.0, 9.0}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gradcheck_catches_a_wrong_backward) {
  // y = 2x with a backward that claims dy/dx = 3: the checker must see the difference.
  auto wrong_double = [](const std::vector<T>& in) {
    T out = T::empty(in[0].shape());
    out.vec() = in[0].vec() * 2.0;
    if (ag::needs_grad<double>({&in[0]}))
      ag::attach(out, "wrong", {in[0].node_ptr()}, [](ag::Node<double>& n) {
        for (int64_t i = 0; i < n.numel(); ++i) n.inputs[0]->grad_buffer()[i] += 3.0 * n.grad[i];
      });
    return out;
  };
  T x = T::from({3}, {0.1, 0.2, 0.3}, true);
  const ag::GradcheckResult r = ag::gradcheck(wrong_double, {x});
  BOOST_TEST(r.worst() > 0.3);
  const ag::GradcheckResult ok =
      ag::gradcheck([](const std::vector<T>& in) { return ag::scale(in[0], 2.0); }, {x});
  BOOST_TEST(ok.worst() < 1e-9);
}

BOOST_AUTO_TEST_CASE(richardson_removes_the_central_differences_truncation_error) {
  // exp(400 x): the truncation error of D(h) is f^(3) h^2 / 6, 400^2 * 1e-10 / 6 = 2.7e-6 of the derivative,
  // so plain central differences fail a correct gradient at 1e-6; Richardson's step (4 D(h/2) - D(h)) / 3
  // leaves O(h^4) and passes it. The wrong backward above still fails with the default (refining) options.
  auto steep = [](const std::vector<T>& in) { return ag::exp(ag::scale(in[0], 400.0)); };
  const T x = T::from({3}, {0.001, -0.002, 0.0005}, true);
  ag::GradcheckOptions plain;
  plain.refine_above = INFINITY;
  const ag::GradcheckResult unrefined = ag::gradcheck(steep, {x}, plain);
  BOOST_TEST(unrefined.worst() > 2e-6);
  BOOST_TEST(unrefined.worst() < 3e-6);
  BOOST_TEST(ag::gradcheck(steep, {x}).worst() < 1e-9);
}

BOOST_AUTO_TEST_CASE(gradcheck_samples_max_elements_without_repeats) {
  // A backward wrong in element 7 only (of 40): every element checked finds it; a sample of 10 evaluates f
  // 1 + 2 x 10 times and reports the error only if element 7 was drawn; all 40 drawn finds it again.
  int calls = 0;
  auto wrong_at_7 = [&calls](const std::vector<T>& in) {
    ++calls;
    T out = T::empty(in[0].shape());
    out.vec() = in[0].vec() * 2.0;
    if (ag::needs_grad<double>({&in[0]}))
      ag::attach(out, "wrong_at_7", {in[0].node_ptr()}, [](ag::Node<double>& n) {
        for (int64_t i = 0; i < n.numel(); ++i)
          n.inputs[0]->grad_buffer()[i] += (i == 7 ? 3.0 : 2.0) * n.grad[i];
      });
    return out;
  };
  std::vector<double> values(40);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01 * static_cast<double>(i);
  const T x = T::from({40}, values, true);
  const ag::GradcheckResult all = ag::gradcheck(wrong_at_7, {x});
  BOOST_TEST(all.worst() > 0.3);
  BOOST_TEST(all.worst_index[0] == 7);
  ag::GradcheckOptions sample;
  sample.max_elements = 10;
  calls = 0;
  const ag::GradcheckResult some = ag::gradcheck(wrong_at_7, {x}, sample);
  const bool found = some.worst() > 0.3;
  BOOST_TEST(calls == 1 + 2 * 10 + (found ? 2 : 0));  // the wrong element also takes Richardson's D(h/2)
  BOOST_TEST((found ? some.worst_index[0] == 7 : some.worst() < 1e-9));
  sample.max_elements = 40;
  BOOST_TEST(ag::gradcheck(wrong_at_7, {x}, sample).worst_index[0] == 7);
}
