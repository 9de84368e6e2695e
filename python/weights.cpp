// The Run's weights in TransformerLens's names and shapes (W_E, W_pos, W_Q, ..., W_U, b_U, QK, OV) as
// properties with validating setters, load_state_dict and save. The layout (PyTorch's (out, in) weights
// split into heads) is arranged in Python (python/attograd/_weights.py) from the model's view (`view`,
// nn/model_view.h: which parameter each weight is, each query head's kv head); every write goes through
// _set_parameter, which checks the name, shape and values as the checkpoint loader does, and save through
// train::save_model_run.
#include <cmath>

#include "nn/model_view.h"
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
  // The model's view (nn/model_view.h) as Python reads it: each tensor's parameter name (None where the model
  // has none), per layer the attention's and MLP's projections, each query head's kv head, and the sizes.
  impl.def("view", [](const Run& r) {
    const auto run = r.get();
    const nn::ModelView<float> v = nn::view(*run->model);
    const auto params = run->model->named_parameters();
    auto name_of = [&](const ag::Tensor<float>& t) -> py::object {
      if (!t.defined()) return py::none();
      for (const auto& p : params)
        if (p.tensor->data() == t.data()) return py::str(p.name);
      return py::none();
    };
    auto linear = [&](const nn::LinearView<float>& l) {
      py::dict d;
      d["weight"] = name_of(l.weight);
      d["bias"] = name_of(l.bias);
      return d;
    };
    py::list layers;
    for (const nn::BlockView<float>& b : v.layers) {
      py::dict layer;
      layer["query"] = linear(b.attention.query);
      layer["key"] = linear(b.attention.key);
      layer["value"] = linear(b.attention.value);
      layer["output"] = linear(b.attention.output);
      if (b.has_mlp) {
        layer["up"] = linear(b.feed_forward.up);
        layer["gate"] = linear(b.feed_forward.gate_proj);
        layer["down"] = linear(b.feed_forward.down);
      }
      layers.append(layer);
    }
    py::dict out;
    out["token_embedding"] = name_of(v.token_embedding);
    out["position_embedding"] = name_of(v.position_embedding);
    out["unembed"] = linear(v.unembed);
    out["layers"] = layers;
    const nn::AttentionView<float>& a = v.layers.front().attention;
    py::list kv;
    for (int64_t h = 0; h < a.n_heads; ++h) kv.append(a.kv_head(h));
    out["kv_head"] = kv;
    out["n_heads"] = a.n_heads;
    out["n_kv_heads"] = a.n_kv_heads;
    out["d_head"] = a.dk;
    return out;
  });
  impl.def("save", [](const Run& r, const std::string& path) {
    const auto run = r.get();
    train::save_model_run(path, run->config, *run->model, run->step);
  });
}

}  // namespace pyag
