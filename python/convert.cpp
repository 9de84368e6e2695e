#include "python/convert.h"

#include <stdexcept>

#include "io/json_read.h"

namespace pyag {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

std::vector<int64_t> array_shape(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

std::string dtype_name(const py::array& a) {
  return py::str(a.dtype()).cast<std::string>();
}

template <typename T>
const char* dtype_of() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

}  // namespace

template <typename T>
py::array tensor_view(const ag::Tensor<T>& t, bool writable) {
  auto* owner = new ag::Tensor<T>(t);  // shares the node: the storage lives as long as the array
  py::capsule base(owner, [](void* p) { delete static_cast<ag::Tensor<T>*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides(shape.size());
  py::ssize_t stride = sizeof(T);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  py::array a(py::dtype::of<T>(), shape, strides, owner->data(), base);
  if (!writable) a.attr("setflags")(py::arg("write") = false);
  return a;
}

template <typename T>
ag::Tensor<T> tensor_from_array(py::handle value, const std::string& argument,
                                const std::vector<int64_t>* expected) {
  const std::string want =
      std::string("a ") + dtype_of<T>() + " array" + (expected ? " of shape " + shape_text(*expected) : "");
  py::array a;
  if (py::isinstance<py::array>(value)) {
    a = py::reinterpret_borrow<py::array>(value);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(value);  // empty when it fails
    if (!a) throw std::invalid_argument(argument + ": expected " + want + ", got a list that is not one");
  } else {
    throw std::invalid_argument(argument + ": expected " + want + ", got " +
                                py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  const std::vector<int64_t> shape = array_shape(a);
  if (!a.dtype().is(py::dtype::of<T>()) || (expected && shape != *expected))
    throw std::invalid_argument(argument + ": expected " + want + ", got " + dtype_name(a) + " of shape " +
                                shape_text(shape));
  const auto c = py::array_t<T, py::array::c_style>::ensure(a);  // a contiguous copy only when strided
  if (!c) throw py::error_already_set();
  return ag::Tensor<T>::from(shape, std::vector<T>(c.data(), c.data() + c.size()));
}

std::vector<int32_t> token_ids(py::handle value, const std::string& argument, int vocab, int max_len,
                               int64_t* batch, int64_t* length) {
  py::array a;
  if (py::isinstance<py::array>(value)) {
    a = py::reinterpret_borrow<py::array>(value);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    a = py::module_::import("numpy").attr("asarray")(value);
  } else {
    throw std::invalid_argument(argument +
                                ": expected token ids (a list or an integer array of shape (T,) or "
                                "(B, T)), got " +
                                py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  const std::vector<int64_t> shape = array_shape(a);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw std::invalid_argument(argument + ": expected integer token ids, got dtype " + dtype_name(a) +
                                " of shape " + shape_text(shape));
  if (shape.empty() || shape.size() > 2 || a.size() == 0)
    throw std::invalid_argument(argument + ": expected a non-empty shape (T,) or (B, T), got shape " +
                                shape_text(shape));
  *batch = shape.size() == 2 ? shape[0] : 1;
  *length = shape.back();
  if (*length > max_len)
    throw std::invalid_argument(argument + ": " + std::to_string(*length) +
                                " tokens, but the model takes at most max_len " + std::to_string(max_len));
  const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!c) throw py::error_already_set();
  std::vector<int32_t> ids(static_cast<size_t>(c.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = c.data()[i];
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(argument + ": token id " + std::to_string(id) + " at index " +
                                  std::to_string(i) + " is outside the vocabulary 0.." +
                                  std::to_string(vocab - 1));
    ids[i] = static_cast<int32_t>(id);
  }
  return ids;
}

int64_t int_of(py::handle value, const std::string& argument) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
    throw py::type_error(argument + ": expected an int, got " +
                         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0)
    throw std::invalid_argument(argument + ": " + py::str(value).cast<std::string>() + " is out of range");
  return static_cast<int64_t>(v);
}

py::object json_to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& x : j) out.append(json_to_python(x));
      return std::move(out);
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = json_to_python(v);
      return std::move(out);
    }
    default:
      return py::none();  // binary and discarded values: never in attograd's JSON
  }
}

nlohmann::json python_to_json(py::handle value, const std::string& argument) {
  // numpy arrays and scalars as the lists and numbers they hold; anything else json cannot hold stays a
  // TypeError, and a float JSON cannot hold (nan, inf) a ValueError, each naming the argument.
  const py::cpp_function plain([](py::handle v) -> py::object {
    if (py::hasattr(v, "tolist")) return v.attr("tolist")();
    throw py::type_error("Object of type " + py::str(py::type::of(v).attr("__name__")).cast<std::string>() +
                         " is not JSON serializable");
  });
  std::string text;
  try {
    text = py::module_::import("json")
               .attr("dumps")(value, py::arg("allow_nan") = false, py::arg("default") = plain)
               .cast<std::string>();
  } catch (py::error_already_set& e) {
    if (argument.empty() || !(e.matches(PyExc_TypeError) || e.matches(PyExc_ValueError))) throw;
    const std::string message = argument + ": " + py::str(e.value()).cast<std::string>();
    if (e.matches(PyExc_TypeError)) throw py::type_error(message);
    throw py::value_error(message);
  }
  return io::parse_json_text(text, argument.empty() ? "argument" : argument);  // bounded: no recursion
}

template py::array tensor_view(const ag::Tensor<float>&, bool);
template py::array tensor_view(const ag::Tensor<double>&, bool);
template ag::Tensor<float> tensor_from_array(py::handle, const std::string&, const std::vector<int64_t>*);
template ag::Tensor<double> tensor_from_array(py::handle, const std::string&, const std::vector<int64_t>*);

}  // namespace pyag
