// The parts of the Python module attograd (python/module.cpp puts them together): each adds its classes and
// functions to the module. docs/python.md is the API's reference.
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "train/config.h"

namespace pyag {

namespace py = pybind11;

// A path that does not exist: FileNotFoundError in Python, with the C++ side's one-line message.
class FileNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// attograd.ConfigError and the translation of every C++ exception to a Python one with the same text:
// train::ConfigError -> ConfigError (a ValueError), io::JsonError (a value the JSON reader refuses) ->
// ValueError, FileNotFound -> FileNotFoundError, std::logic_error (invalid_argument such as
// analysis::RequestError, out_of_range, ...) -> ValueError, any other std::exception -> RuntimeError.
void bind_errors(py::module_& m);
// attograd.load_run and the Run it returns.
void bind_run(py::module_& m);
// The library calls of attograd.ActivationCache, what Run.run_with_cache returns (python/cache.cpp; the
// class is python/attograd/_cache.py).
void bind_cache(py::module_& m);
// The library calls of the Run's weights in TransformerLens's names, load_state_dict and save
// (python/weights.cpp; the properties are python/attograd/_weights.py).
void bind_weights(py::module_& m);
// A config given as a dict (errors name `config`) or a path (FileNotFound when missing), with --set
// overrides, validated and resolved as `attograd train` reads it (python/train.cpp).
train::Config read_config(py::handle config, const std::vector<std::string>& sets);
// attograd.train.
void bind_train(py::module_& m);
// attograd.Tensor, Tensor64, the ops, gradcheck.
void bind_engine(py::module_& m);
// attograd.nn (Linear, LayerNorm, MultiHeadAttention, TransformerBlock, CausalLM), attograd.optim (AdamW,
// Muon) and attograd.Task, the task's data stream (python/nn.cpp).
void bind_nn(py::module_& m);
// Last, after every binding: each function and method gets a final overload so that a call whose
// arguments match no signature raises a one-line TypeError (python/arguments.cpp).
void one_line_argument_errors(py::module_& m);

}  // namespace pyag
