// The Python module attograd: a thin layer over the C++ libraries (docs/python.md). Runs (load, forward,
// hooks, cache, patch, circuits, scores, ablate), training, and the engine's Tensor for small experiments.
#include "python/bindings.h"

PYBIND11_MODULE(attograd, m) {
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
}
