// The Python module attograd's compiled part, attograd._core: a thin layer over the C++ libraries
// (docs/python.md). Runs (load, forward, hooks, cache, patch, circuits, scores, ablate), training, and the
// engine's Tensor for small experiments. The package python/attograd/ re-exports it and adds its Python.
#include "python/bindings.h"

PYBIND11_MODULE(_core, m) {
  // Bound under the package's name, as when the extension was attograd itself: classes, submodules and the
  // signatures in docstrings and errors read attograd.Run, attograd.nn.Linear, where the package has them.
  const pybind11::object core_name = m.attr("__name__");
  m.attr("__name__") = "attograd";
  m.doc() =
      "attograd: train, capture, patch and read small transformers on the attograd engine; tensors and "
      "activations as numpy arrays (docs/python.md)";
  pyag::bind_errors(m);
  // The engine first: attograd.gradcheck(f, inputs) is its overload, tried before the gradcheck tool's
  // gradcheck(config, ...) (bound by bind_run's tools), which takes every call whose f is not callable.
  pyag::bind_engine(m);
  pyag::bind_run(m);
  pyag::bind_cache(m);
  pyag::bind_weights(m);
  pyag::bind_train(m);
  pyag::bind_nn(m);
  pyag::one_line_argument_errors(m);
  m.attr("__name__") = core_name;
}
