// The engine for small experiments: attograd.Tensor (float32) and attograd.Tensor64 (float64) from and to
// numpy, the ops of autograd/ops.h that a model needs (elementwise with broadcasting and with Python scalars
// on either side, powers, matmul, the activations, reductions over axes, softmax, cross-entropy, reshape,
// permute, concatenation, NumPy indexing), backward(), .grad and retain_grad(), and attograd.gradcheck on
// float64 functions. examples/notebooks and tests/python/test_engine.py train XOR with it, as
// examples/mlp_xor does in C++.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace pyag {

namespace {

// Dims given as None (every dim), an int or a sequence of ints, each in [-ndim, ndim), as sorted
// non-negative dims without repeats. ValueError naming `argument` otherwise.
std::vector<int64_t> dims_of(py::handle value, int64_t ndim, const std::string& argument) {
  std::vector<int64_t> given;
  if (value.is_none()) {
    for (int64_t d = 0; d < ndim; ++d) given.push_back(d);
    return given;
  }
  auto one = [&](py::handle v) {
    if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
      throw py::type_error(argument + ": expected an int or a sequence of ints, got " + type_name(v));
    const int64_t d = int_of(v, argument);
    if (d < -ndim || d >= ndim)
      throw std::invalid_argument(argument + ": dim " + std::to_string(d) + " is out of range for " +
                                  std::to_string(ndim) + " dims");
    given.push_back(d < 0 ? d + ndim : d);
  };
  if (py::isinstance<py::int_>(value)) {
    one(value);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (py::handle v : value) one(v);
  } else {
    throw py::type_error(argument + ": expected an int or a sequence of ints, got " + type_name(value));
  }
  std::vector<int64_t> sorted = given;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw std::invalid_argument(argument + ": a dim is given twice");
  return sorted;
}

// An order of dims for permute: an int sequence, as given (ag::permute checks it is a permutation).
std::vector<int64_t> dims_of_order(py::handle value, const std::string& argument) {
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
    throw py::type_error(argument + ": expected a sequence of ints, got " + type_name(value));
  std::vector<int64_t> out;
  for (py::handle v : value) {
    if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v))
      throw py::type_error(argument + ": expected a sequence of ints, got " + type_name(v) + " in it");
    out.push_back(int_of(v, argument));
  }
  return out;
}

// sum or mean over `dims` (sorted), one dim at a time from the last so the earlier ones keep their place.
template <typename T>
ag::Tensor<T> reduce(const ag::Tensor<T>& a, py::handle dim, bool keepdim, bool mean) {
  if (dim.is_none() && !keepdim) return mean ? ag::mean(a) : ag::sum(a);
  const std::vector<int64_t> dims = dims_of(dim, a.dim(), "dim");
  ag::Tensor<T> out = a;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it)
    out = mean ? ag::mean(out, *it, keepdim) : ag::sum(out, *it, keepdim);
  return out;
}

// NumPy's indexing of a: the flat positions it picks, found by indexing an array of positions with the same
// key (ints, slices, None, Ellipsis, integer and boolean arrays), then gathered by ag::take.
template <typename T>
ag::Tensor<T> index(const ag::Tensor<T>& a, py::handle key) {
  if (py::isinstance<ag::Tensor<float>>(key) || py::isinstance<ag::Tensor<double>>(key))
    throw py::type_error("index: expected ints, slices or an integer or boolean array, got " +
                         type_name(key));
  const py::module_ np = py::module_::import("numpy");
  const py::object positions =
      np.attr("arange")(a.numel(), py::arg("dtype") = "int64").attr("reshape")(py::cast(a.shape()));
  const auto picked = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(
      np.attr("asarray")(positions.attr("__getitem__")(key)));
  if (!picked) throw py::error_already_set();
  const std::vector<int64_t> shape(picked.shape(), picked.shape() + picked.ndim());
  return ag::take(a, std::vector<int64_t>(picked.data(), picked.data() + picked.size()), shape);
}

// cross_entropy's targets: integers (a list or an integer array), each a class of [0, classes) or
// ignore_index; anything else (a float, an id past int32) is refused, never rounded or wrapped.
std::vector<int32_t> class_ids(py::handle targets, int64_t classes, int32_t ignore_index) {
  const py::array a = py::module_::import("numpy").attr("asarray")(targets);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error("targets: expected integer class ids, got dtype " +
                         py::str(a.dtype()).cast<std::string>());
  const auto t = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!t) throw py::error_already_set();
  // Unsigned ids are read as unsigned: the cast to int64 would wrap 2^64 - 1 to -1 (an ignore_index).
  py::array_t<uint64_t, py::array::c_style | py::array::forcecast> u;
  if (kind == 'u') u = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int32_t> ids(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = t.data()[i];
    if (kind == 'u' && u.data()[i] >= static_cast<uint64_t>(classes))
      throw std::invalid_argument("targets: class id " + std::to_string(u.data()[i]) + " at index " +
                                  std::to_string(i) + " is outside 0.." + std::to_string(classes - 1));
    if ((id < 0 || id >= classes) && id != ignore_index)
      throw std::invalid_argument("targets: class id " + std::to_string(id) + " at index " +
                                  std::to_string(i) + " is outside 0.." + std::to_string(classes - 1) +
                                  " (and is not ignore_index " + std::to_string(ignore_index) + ")");
    ids[i] = static_cast<int32_t>(id);
  }
  return ids;
}

// Tensors to concatenate: a list or tuple of tensors of one dtype, TypeError naming the position otherwise.
template <typename T>
std::vector<ag::Tensor<T>> tensor_list(py::handle value, const std::string& argument) {
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
    throw py::type_error(argument + ": expected a list of tensors, got " + type_name(value));
  std::vector<ag::Tensor<T>> out;
  for (py::handle v : value) {
    if (!py::isinstance<ag::Tensor<T>>(v))
      throw py::type_error(argument + "[" + std::to_string(out.size()) + "]: expected a " +
                           (sizeof(T) == 4 ? "Tensor" : "Tensor64") + " like " + argument + "[0], got " +
                           type_name(v));
    out.push_back(v.cast<ag::Tensor<T>>());
  }
  if (out.empty()) throw std::invalid_argument(argument + ": expected at least one tensor, got none");
  return out;
}

// The tensor class's construction, properties, gradient methods, len and indexing.
template <typename T>
void tensor_basics(py::class_<ag::Tensor<T>>& c) {
  using Tensor = ag::Tensor<T>;
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
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) -> py::object {
            py::object a = tensor_view(t, false);
            if (!dtype.is_none()) return a.attr("astype")(dtype);
            if (!copy.is_none() && py::bool_(copy)) return a.attr("copy")();
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
          "numpy's protocol: np.asarray(t) is t.numpy() (read-only, shared), np.array(t) a copy.")
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
      .def(
          "retain_grad", [](Tensor& t) { t.retain_grad(); },
          "Keeps this (computed) tensor's gradient after backward(), as PyTorch's retain_grad.")
      .def_property_readonly("ndim", [](const Tensor& t) { return t.dim(); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__getitem__", &index<T>, py::arg("key"),
           "NumPy indexing (ints, slices, None, ..., integer and boolean arrays), differentiable.");
}

// The tensor class's arithmetic operators (each with a tensor, then a scalar), elementwise functions,
// reductions, shape methods and repr.
template <typename T>
void tensor_operators(py::class_<ag::Tensor<T>>& c, const char* name) {
  using Tensor = ag::Tensor<T>;
  c.def(
       "__add__", [](const Tensor& a, const Tensor& b) { return ag::add(a, b); }, py::is_operator())
      .def(
          "__add__", [](const Tensor& a, T s) { return ag::add_scalar(a, s); }, py::is_operator())
      .def(
          "__radd__", [](const Tensor& a, T s) { return ag::add_scalar(a, s); }, py::is_operator())
      .def(
          "__sub__", [](const Tensor& a, const Tensor& b) { return ag::sub(a, b); }, py::is_operator())
      .def(
          "__sub__", [](const Tensor& a, T s) { return ag::add_scalar(a, -s); }, py::is_operator())
      .def(
          "__rsub__", [](const Tensor& a, T s) { return ag::add_scalar(ag::neg(a), s); }, py::is_operator())
      .def(
          "__mul__", [](const Tensor& a, const Tensor& b) { return ag::mul(a, b); }, py::is_operator())
      .def(
          "__mul__", [](const Tensor& a, T s) { return ag::scale(a, s); }, py::is_operator())
      .def(
          "__rmul__", [](const Tensor& a, T s) { return ag::scale(a, s); }, py::is_operator())
      .def(
          "__truediv__", [](const Tensor& a, const Tensor& b) { return ag::div(a, b); }, py::is_operator())
      .def(
          "__truediv__", [](const Tensor& a, T s) { return ag::div(a, Tensor::scalar(s)); },
          py::is_operator())
      .def(
          "__rtruediv__", [](const Tensor& a, T s) { return ag::div(Tensor::scalar(s), a); },
          py::is_operator())
      .def(
          "__pow__", [](const Tensor& a, T p) { return ag::pow(a, p); }, py::is_operator())
      .def(
          "__rpow__",
          [](const Tensor& a, T base) {
            if (!(base > 0))
              throw std::invalid_argument("base ** tensor: expected a positive base, got " +
                                          std::to_string(base));
            return ag::exp(ag::scale(a, static_cast<T>(std::log(base))));
          },
          py::is_operator())
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return ag::matmul(a, b); }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return ag::neg(a); })
      .def("sqrt", &ag::sqrt<T>)
      .def("exp", &ag::exp<T>)
      .def("log", &ag::log<T>)
      .def("tanh", &ag::tanh<T>)
      .def("relu", &ag::relu<T>)
      .def(
          "sum", [](const Tensor& a, py::object dim, bool keepdim) { return reduce(a, dim, keepdim, false); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "mean", [](const Tensor& a, py::object dim, bool keepdim) { return reduce(a, dim, keepdim, true); },
          py::arg("dim") = py::none(), py::arg("keepdim") = false)
      .def(
          "reshape", [](const Tensor& a, std::vector<int64_t> shape) { return ag::reshape(a, shape); },
          py::arg("shape"))
      .def(
          "permute",
          [](const Tensor& a, py::args axes) {
            if (axes.size() == 1 && !py::isinstance<py::int_>(axes[0]))
              return ag::permute(a, dims_of_order(axes[0], "axes"));
            return ag::permute(a, dims_of_order(axes, "axes"));
          },
          "permute(*axes) or permute(axes): out.shape[i] = shape[axes[i]].")
      .def(
          "transpose",
          [](const Tensor& a, py::object axes) {
            return axes.is_none() ? ag::transpose(a) : ag::permute(a, dims_of_order(axes, "axes"));
          },
          py::arg("axes") = py::none(), "The last two dims swapped, or the dims in the order `axes`.")
      .def("__repr__", [name](const Tensor& t) {
        return std::string("<attograd.") + name + " shape " + shape_text(t.shape()) +
               (t.requires_grad() ? " requires_grad" : "") + ">";
      });
}

// The module's functions on tensors of this dtype (overloads of the other dtype's).
template <typename T>
void tensor_functions(py::module_& m) {
  using Tensor = ag::Tensor<T>;
  m.def("add", &ag::add<T>, py::arg("a"), py::arg("b"));
  m.def("sub", &ag::sub<T>, py::arg("a"), py::arg("b"));
  m.def("mul", &ag::mul<T>, py::arg("a"), py::arg("b"));
  m.def("div", &ag::div<T>, py::arg("a"), py::arg("b"));
  m.def("matmul", &ag::matmul<T>, py::arg("a"), py::arg("b"));
  m.def("tanh", &ag::tanh<T>, py::arg("a"));
  m.def("relu", &ag::relu<T>, py::arg("a"));
  m.def("gelu", &ag::gelu<T>, py::arg("a"));
  m.def("silu", &ag::silu<T>, py::arg("a"));
  m.def("exp", &ag::exp<T>, py::arg("a"));
  m.def("log", &ag::log<T>, py::arg("a"));
  m.def("sqrt", &ag::sqrt<T>, py::arg("a"));
  m.def("pow", &ag::pow<T>, py::arg("a"), py::arg("exponent"));
  m.def("softmax", &ag::softmax<T>, py::arg("a"));
  m.def("log_softmax", &ag::log_softmax<T>, py::arg("a"));
  m.def(
      "transpose",
      [](const Tensor& a, py::object axes) {
        return axes.is_none() ? ag::transpose(a) : ag::permute(a, dims_of_order(axes, "axes"));
      },
      py::arg("a"), py::arg("axes") = py::none());
  m.def(
      "permute", [](const Tensor& a, py::handle axes) { return ag::permute(a, dims_of_order(axes, "axes")); },
      py::arg("a"), py::arg("axes"));
  m.def("reshape", &ag::reshape<T>, py::arg("a"), py::arg("shape"));
  m.def(
      "sum", [](const Tensor& a, py::object dim, bool keepdim) { return reduce(a, dim, keepdim, false); },
      py::arg("a"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def(
      "mean", [](const Tensor& a, py::object dim, bool keepdim) { return reduce(a, dim, keepdim, true); },
      py::arg("a"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  m.def(
      "cross_entropy",
      [](const Tensor& logits, py::handle targets, int32_t ignore_index) {
        return ag::cross_entropy(logits, class_ids(targets, logits.size(-1), ignore_index), ignore_index);
      },
      py::arg("logits"), py::arg("targets"), py::arg("ignore_index") = -1,
      "Mean negative log-likelihood of integer targets (one per row) under softmax(logits).");
}

template <typename T>
void bind_tensor(py::module_& m, const char* name, const char* dtype) {
  const std::string what = std::string("A ") + dtype + " tensor of the engine, with its gradient.";
  py::class_<ag::Tensor<T>> c(m, name, what.c_str());
  tensor_basics<T>(c);
  tensor_operators<T>(c, name);
  tensor_functions<T>(m);
}

}  // namespace

void bind_engine(py::module_& m) {
  bind_tensor<float>(m, "Tensor", "float32");
  bind_tensor<double>(m, "Tensor64", "float64");
  // numpy's binary operators step aside (NotImplemented), so np.float32(2) * t is the Tensor's __rmul__.
  m.attr("Tensor").attr("__array_ufunc__") = py::none();
  m.attr("Tensor64").attr("__array_ufunc__") = py::none();
  m.def(
      "cat",
      [](py::handle tensors, int64_t dim) -> py::object {
        if ((py::isinstance<py::list>(tensors) || py::isinstance<py::tuple>(tensors)) &&
            py::len(tensors) > 0 && py::isinstance<ag::Tensor<double>>(tensors[py::int_(0)]))
          return py::cast(ag::concat(tensor_list<double>(tensors, "tensors"), dim));
        return py::cast(ag::concat(tensor_list<float>(tensors, "tensors"), dim));
      },
      py::arg("tensors"), py::arg("dim") = 0, "Tensors of one dtype joined along dim, as torch.cat.");
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
      [](py::function f, py::handle inputs, double eps) {
        if (!py::isinstance<py::list>(inputs) && !py::isinstance<py::tuple>(inputs))
          throw py::type_error("inputs: expected a list of Tensor64, got " + type_name(inputs));
        std::vector<ag::Tensor<double>> tensors;
        for (py::handle t : inputs) {
          if (!py::isinstance<ag::Tensor<double>>(t))
            throw py::type_error("inputs[" + std::to_string(tensors.size()) +
                                 "]: expected a Tensor64 (gradcheck runs in float64), got " + type_name(t));
          tensors.push_back(t.cast<ag::Tensor<double>>());
          tensors.back().set_requires_grad(true);
        }
        if (!std::isfinite(eps) || eps <= 0)
          throw std::invalid_argument("eps: expected a positive finite step, got " + std::to_string(eps));
        const auto call = [&f](const std::vector<ag::Tensor<double>>& in) {
          const py::object out = f(in);
          if (!py::isinstance<ag::Tensor<double>>(out))
            throw py::type_error("f: expected to return a Tensor64, got " + type_name(out));
          return out.cast<ag::Tensor<double>>();
        };
        ag::GradcheckOptions options;
        options.eps = eps;
        const ag::GradcheckResult r = ag::gradcheck(call, tensors, options);
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
