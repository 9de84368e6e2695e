#include "python/convert.h"

#include <cmath>
#include <stdexcept>

#include "io/field_table.h"
#include "io/json_read.h"
#include "io/printable.h"

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

bool array_like(py::handle value) {
  if (py::isinstance<py::array>(value) || py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value))
    return false;
  return PyObject_CheckBuffer(value.ptr()) || py::hasattr(value, "__array__") ||
         py::hasattr(value, "__array_interface__");
}

py::array as_array(py::handle value) {
  py::object v = py::reinterpret_borrow<py::object>(value);
  // A torch tensor: off the autograd graph and on the CPU first (numpy refuses one that requires grad).
  if (py::hasattr(v, "detach") && py::hasattr(v, "cpu") && py::hasattr(v, "numpy"))
    v = v.attr("detach")().attr("cpu")();
  return py::module_::import("numpy").attr("asarray")(v);
}

namespace {}  // namespace

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
  } else if (array_like(value)) {
    a = as_array(value);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(value);  // empty when it fails
    if (!a) throw std::invalid_argument(argument + ": expected " + want + ", got a list that is not one");
  } else {
    throw std::invalid_argument(argument + ": expected " + want + ", got " + type_name(value));
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
  } else if (array_like(value)) {
    a = as_array(value);
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    a = py::module_::import("numpy").attr("asarray")(value);
  } else {
    throw std::invalid_argument(argument +
                                ": expected token ids (a list or an integer array of shape (T,) or "
                                "(B, T)), got " +
                                type_name(value));
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
    throw py::type_error(argument + ": expected an int, got " + type_name(value));
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

std::string type_name(py::handle value) {
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
}

namespace {

// `value` at `pointer` (inside `argument`) as JSON; `depth` containers are open around it.
nlohmann::json to_json(py::handle value, const std::string& argument, const std::string& pointer, int depth) {
  const auto fail = [&](const std::string& what) {
    throw io::JsonError(io::printable(argument + ": " + (pointer.empty() ? "" : pointer + ": ") + what));
  };
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow == 0) return static_cast<int64_t>(v);
    if (overflow > 0) {
      const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
      if (!PyErr_Occurred()) return static_cast<uint64_t>(u);
      PyErr_Clear();
    }
    std::string text = py::str(value).cast<std::string>();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    fail("integer out of range (64 bits), got " + text);
  }
  if (py::isinstance<py::float_>(value)) {
    const double x = value.cast<double>();
    if (!std::isfinite(x)) fail("expected a finite number, got " + py::repr(value).cast<std::string>());
    return x;
  }
  if (py::isinstance<py::str>(value)) {
    try {
      return value.cast<std::string>();
    } catch (const std::exception&) {  // lone surrogates: no UTF-8 for them
      PyErr_Clear();
      fail("expected text that is valid UTF-8");
    }
  }
  if (py::isinstance<py::bytes>(value) || py::isinstance<py::bytearray>(value))
    fail("expected text (str), got " + type_name(value));
  const bool container =
      py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value) || py::isinstance<py::dict>(value);
  if (container && depth >= io::kMaxJsonDepth)  // named without its pointer: 64 levels of it
    throw io::JsonError(
        io::printable(argument + ": nested deeper than " + std::to_string(io::kMaxJsonDepth) + " levels"));
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::json out = nlohmann::json::array();
    size_t i = 0;
    for (py::handle x : value)
      out.push_back(to_json(x, argument, pointer + "/" + std::to_string(i++), depth + 1));
    return out;
  }
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(value)) {
      if (!py::isinstance<py::str>(k)) fail("expected text keys, got a key of type " + type_name(k));
      const std::string key = to_json(k, argument, pointer, depth).get<std::string>();
      out[key] = to_json(v, argument, io::child(pointer, key), depth + 1);
    }
    return out;
  }
  // numpy arrays and scalars: the lists and numbers they hold.
  if (py::hasattr(value, "tolist") && py::hasattr(value, "dtype"))
    return to_json(value.attr("tolist")(), argument, pointer, depth);
  fail("expected None, a bool, number, str, list or dict, got " + type_name(value));
  return nullptr;
}

}  // namespace

nlohmann::json python_to_json(py::handle value, const std::string& argument) {
  return to_json(value, argument, "", 0);
}

template py::array tensor_view(const ag::Tensor<float>&, bool);
template py::array tensor_view(const ag::Tensor<double>&, bool);
template ag::Tensor<float> tensor_from_array(py::handle, const std::string&, const std::vector<int64_t>*);
template ag::Tensor<double> tensor_from_array(py::handle, const std::string&, const std::vector<int64_t>*);

}  // namespace pyag
