// The Run's weights in TransformerLens's names and shapes (W_E, W_pos, W_Q, ..., W_U, b_U, QK, OV) as
// properties with validating setters, load_state_dict and save. The layout (PyTorch's (out, in) weights
// split into heads) is arranged in Python (python/attograd/_weights.py); every write goes through
// _set_parameter, which checks the name, shape and values as the checkpoint loader does, and save through
// train::save_model_run.
#include <cmath>

#include "python/bindings.h"
#include "python/convert.h"
#include "python/run.h"
#include "train/checkpoint.h"

namespace pyag {

void bind_weights(py::module_& m) {
  py::module_ impl =
      m.def_submodule("_weights_impl", "The library calls behind the Run's weight properties.");
  // Copies `value` into the parameter `name` (its PyTorch state_dict name); `argument` names it in errors.
  impl.def("set_parameter", [](const Run& r, const std::string& name, py::handle value,
                               const std::string& argument) {
    const auto run = r.get();
    for (const auto& p : run->model->named_parameters()) {
      if (p.name != name) continue;
      py::object v = py::reinterpret_borrow<py::object>(value);
      if (py::isinstance<py::array>(v) && py::reinterpret_borrow<py::array>(v).dtype().kind() == 'f')
        v = v.attr("astype")("float32");
      const std::vector<int64_t> shape = p.tensor->shape();
      const ag::Tensor<float> t = tensor_from_array<float>(v, argument, &shape);
      for (int64_t i = 0; i < t.numel(); ++i)
        if (!std::isfinite(t.data()[i]) || std::fabs(t.data()[i]) > train::kMaxWeightMagnitude)
          throw std::invalid_argument(argument + ": expected finite values of magnitude at most 1e6, got " +
                                      std::to_string(t.data()[i]));
      std::copy(t.data(), t.data() + t.numel(), p.tensor->data());
      return;
    }
    throw std::invalid_argument(argument + ": no parameter " + name +
                                " in this model (see run.parameters())");
  });
  impl.def("save", [](const Run& r, const std::string& path) {
    const auto run = r.get();
    train::save_model_run(path, run->config, *run->model, run->step);
  });
}

}  // namespace pyag
