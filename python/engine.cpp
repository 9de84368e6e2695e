// The engine for small experiments: attograd.Tensor (float32) and attograd.Tensor64 (float64) from and to
// numpy, the ops of autograd/ops.h that a small model needs (elementwise with broadcasting, matmul, the
// activations, reductions, softmax, cross-entropy, reshape and transpose), backward() and .grad, and
// attograd.gradcheck on float64 functions. examples/notebooks and tests/python/test_engine.py train XOR
// with it, as examples/mlp_xor does in C++.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace pyag {

namespace {

template <typename T>
void bind_tensor(py::module_& m, const char* name, const char* dtype) {
  using Tensor = ag::Tensor<T>;
  const std::string what = std::string("A ") + dtype + " tensor of the engine, with its gradient.";
  py::class_<Tensor> c(m, name, what.c_str());
  c.def(py::init([](py::handle values, bool requires_grad) {
          Tensor t = tensor_from_array<T>(values, "values");
          t.set_requires_grad(requires_grad);
          return t;
        }),
        py::arg("values"), py::arg("requires_grad") = false)
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("requires_grad", &Tensor::requires_grad)
      .def(
          "numpy", [](const Tensor& t) { return tensor_view(t, false); },
          "The values as a read-only array sharing the tensor's memory.")
      .def_property_readonly(
          "grad",
          [](const Tensor& t) -> py::object {
            if (!t.has_grad()) return py::none();
            return tensor_view(t.grad_tensor(), true);
          },
          "The gradient left by backward() (a copy), or None.")
      .def(
          "backward", [](Tensor& t) { t.backward(); }, "Reverse-mode pass from a one-element tensor.")
      .def("zero_grad", &Tensor::zero_grad)
      .def("detach", &Tensor::detach)
      .def("item", &Tensor::item)
      .def(
          "assign",
          [](Tensor& t, py::handle values) {
            const std::vector<int64_t> shape = t.shape();
            const Tensor v = tensor_from_array<T>(values, "values", &shape);
            t.assign(v.to_vector());
          },
          py::arg("values"), "Overwrites the values in place (same shape), e.g. for an optimiser step.")
      .def("__add__", [](const Tensor& a, const Tensor& b) { return ag::add(a, b); })
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return ag::sub(a, b); })
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return ag::mul(a, b); })
      .def("__mul__", [](const Tensor& a, T s) { return ag::scale(a, s); })
      .def("__rmul__", [](const Tensor& a, T s) { return ag::scale(a, s); })
      .def("__truediv__", [](const Tensor& a, const Tensor& b) { return ag::div(a, b); })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return ag::matmul(a, b); })
      .def("__neg__", [](const Tensor& a) { return ag::neg(a); })
      .def("__repr__", [name](const Tensor& t) {
        return std::string("<attograd.") + name + " shape " + shape_text(t.shape()) +
               (t.requires_grad() ? " requires_grad" : "") + ">";
      });

  m.def("add", &ag::add<T>, py::arg("a"), py::arg("b"));
  m.def("sub", &ag::sub<T>, py::arg("a"), py::arg("b"));
  m.def("mul", &ag::mul<T>, py::arg("a"), py::arg("b"));
  m.def("div", &ag::div<T>, py::arg("a"), py::arg("b"));
  m.def("matmul", &ag::matmul<T>, py::arg("a"), py::arg("b"));
  m.def("tanh", &ag::tanh<T>, py::arg("a"));
  m.def("relu", &ag::relu<T>, py::arg("a"));
  m.def("gelu", &ag::gelu<T>, py::arg("a"));
  m.def("exp", &ag::exp<T>, py::arg("a"));
  m.def("log", &ag::log<T>, py::arg("a"));
  m.def("softmax", &ag::softmax<T>, py::arg("a"));
  m.def("log_softmax", &ag::log_softmax<T>, py::arg("a"));
  m.def("transpose", &ag::transpose<T>, py::arg("a"));
  m.def("reshape", &ag::reshape<T>, py::arg("a"), py::arg("shape"));
  m.def(
      "sum",
      [](const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
        return dim ? ag::sum(a, *dim, keepdim) : ag::sum(a);
      },
      py::arg("a"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def(
      "mean",
      [](const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
        return dim ? ag::mean(a, *dim, keepdim) : ag::mean(a);
      },
      py::arg("a"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def(
      "cross_entropy",
      [](const Tensor& logits, py::handle targets, int32_t ignore_index) {
        // Integers only (a float 1.7 is not class 1), each a class of logits or ignore_index: nothing is
        // truncated or wrapped into range.
        const py::array a = py::module_::import("numpy").attr("asarray")(targets);
        const char kind = a.dtype().kind();
        if (kind != 'i' && kind != 'u' && !(kind == 'b' && a.size() == 0))
          throw std::invalid_argument("cross_entropy: targets: expected integer class ids, got " +
                                      py::str(a.dtype()).cast<std::string>());
        // Unsigned ids read as unsigned: a cast to int64 would wrap 2^64 - 1 to -1 (ignore_index).
        const bool is_unsigned = kind == 'u';
        const auto t = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
        const auto u = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
        if (!t || !u) throw py::error_already_set();
        const int64_t classes = logits.shape().empty() ? 0 : logits.shape().back();
        std::vector<int32_t> ids;
        for (py::ssize_t i = 0; i < t.size(); ++i) {
          const bool too_big = is_unsigned && u.data()[i] >= static_cast<uint64_t>(classes);
          const int64_t id = t.data()[i];
          if (too_big || ((id < 0 || id >= classes) && id != ignore_index))
            throw std::invalid_argument("cross_entropy: targets: " +
                                        (is_unsigned ? std::to_string(u.data()[i]) : std::to_string(id)) +
                                        " at index " + std::to_string(i) + " is not a class in 0.." +
                                        std::to_string(classes - 1) + " (nor ignore_index " +
                                        std::to_string(ignore_index) + ")");
          ids.push_back(static_cast<int32_t>(id));
        }
        return ag::cross_entropy(logits, ids, ignore_index);
      },
      py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -1,
      "Mean negative log-likelihood of integer targets (one per row) under softmax(logits).");
}

}  // namespace

void bind_engine(py::module_& m) {
  bind_tensor<float>(m, "Tensor", "float32");
  bind_tensor<double>(m, "Tensor64", "float64");
  m.def(
      "tensor",
      [](py::handle values, bool requires_grad) -> py::object {
        if (py::isinstance<py::array>(values) &&
            py::reinterpret_borrow<py::array>(values).dtype().is(py::dtype::of<double>()))
          return py::cast(ag::Tensor<double>(tensor_from_array<double>(values, "values"))
                              .set_requires_grad(requires_grad));
        return py::cast(tensor_from_array<float>(values, "values").set_requires_grad(requires_grad));
      },
      py::arg("values"), py::arg("requires_grad") = false,
      "A Tensor64 from a float64 array, otherwise a Tensor (float32; a list is taken as float32).");
  m.def(
      "gradcheck",
      [](const py::function& f, const py::handle& given, double eps) {
        // Checked here rather than by pybind11's overload matching, whose refusal is a multi-line TypeError
        // (and would fall through to the gradcheck tool): gradients are compared in float64 only.
        if (!py::isinstance<py::list>(given) && !py::isinstance<py::tuple>(given))
          throw py::type_error("inputs: expected a list of Tensor64 (float64), got " +
                               py::str(py::type::of(given).attr("__name__")).cast<std::string>());
        std::vector<ag::Tensor<double>> inputs;
        size_t i = 0;
        for (py::handle x : given) {
          if (!py::isinstance<ag::Tensor<double>>(x))
            throw py::type_error("inputs: element " + std::to_string(i) +
                                 ": expected a Tensor64 (gradients are checked in float64), got " +
                                 py::str(py::type::of(x).attr("__name__")).cast<std::string>());
          inputs.push_back(x.cast<ag::Tensor<double>>());
          ++i;
        }
        if (!std::isfinite(eps) || eps <= 0)
          throw std::invalid_argument("eps: expected a positive finite number, got " + std::to_string(eps));
        const auto call = [&f](const std::vector<ag::Tensor<double>>& xs) {
          const py::object out = f(xs);
          if (!py::isinstance<ag::Tensor<double>>(out))
            throw py::type_error("f: expected it to return a Tensor64, got " +
                                 py::str(py::type::of(out).attr("__name__")).cast<std::string>());
          return out.cast<ag::Tensor<double>>();
        };
        ag::GradcheckOptions options;
        options.eps = eps;
        for (auto& t : inputs) t.set_requires_grad(true);
        const ag::GradcheckResult r = ag::gradcheck(call, inputs, options);
        py::dict out;
        out["worst"] = r.worst();
        out["per_input"] = r.worst_rel_error;
        out["report"] = r.report();
        return out;
      },
      py::arg("f"), py::arg("inputs"), py::arg("eps") = 1e-5,
      "Checks f's gradients (Tensor64 inputs -> Tensor64) against central finite differences: the worst "
      "relative error per input.");
}

}  // namespace pyag
