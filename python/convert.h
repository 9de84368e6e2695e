// What crosses between Python and the engine: tensors as numpy arrays (views that keep the tensor's storage
// alive, so an array outlives the run or model it came from), numpy arrays as tensors and token ids (each
// checked, a ValueError naming the argument, the expected and the given dtype or shape), JSON as Python
// objects and back. Not for the API itself: python/run.cpp, train.cpp and engine.cpp use these.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every file of the module: the same conversions everywhere

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace pyag {

namespace py = pybind11;

// "(2, 3)" for a shape, "()" for a scalar's.
std::string shape_text(const std::vector<int64_t>& shape);

// A numpy array of the tensor's values without a copy: it shares the tensor's storage and holds a reference
// to it. `writable` false gives a read-only array (hooks' values, parameters: what flows on in C++).
template <typename T>
py::array tensor_view(const ag::Tensor<T>& t, bool writable);

// A tensor holding a copy of `value`, which must be a numpy array (or array_like: a torch tensor) of T's
// dtype (float32 for float) and, when `expected` is given, of that shape. ValueError "ARGUMENT: expected a
// float32 array of shape (1, 4), got float64 of shape (4,)" otherwise; a list is taken as an array of T.
template <typename T>
ag::Tensor<T> tensor_from_array(py::handle value, const std::string& argument,
                                const std::vector<int64_t>* expected = nullptr);

// Whether `value` is an array of another library: an object with __array__ or __array_interface__ or the
// buffer protocol (a torch tensor, a memoryview), not a numpy array, str or bytes.
bool array_like(py::handle value);
// Such an object as a numpy array (a torch tensor detached and moved to the CPU first).
py::array as_array(py::handle value);

// Token ids from a sequence or array of integers of shape (T,) or (B, T), each in [0, vocab), with at most
// max_len positions: the ids row-major, and B (1 for shape (T,)) and T. ValueError naming `argument`.
std::vector<int32_t> token_ids(py::handle value, const std::string& argument, int vocab, int max_len,
                               int64_t* batch, int64_t* length);

// A Python int (not a bool) as int64: TypeError naming `argument` for another type, ValueError for one out
// of int64's range (never wrapped).
int64_t int_of(py::handle value, const std::string& argument);

// The name of value's Python type ("int", "ndarray"), for messages.
std::string type_name(py::handle value);

py::object json_to_python(const nlohmann::json& j);
// A dict (or list, number, string...) as JSON, numpy arrays and scalars as the lists and numbers they hold.
// What JSON cannot hold is an io::JsonError (ValueError) naming `argument` and where in it: "ARGUMENT: what"
// at the top, "ARGUMENT: /POINTER: what" below, e.g. "config: /train/lr: expected a finite number, got
// nan" (NaN, infinities, integers beyond 64 bits, bytes, keys that are not text, other objects, nesting
// deeper than io::kMaxJsonDepth).
nlohmann::json python_to_json(py::handle value, const std::string& argument = "");

}  // namespace pyag
