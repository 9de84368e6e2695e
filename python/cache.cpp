// attograd.ActivationCache: what Run.run_with_cache returns, a dict {hook point: array} with
// TransformerLens's helpers (accumulated_resid, decompose_resid, stack_head_results, apply_ln_to_stack,
// logit_attrs). Each helper is one call of analysis/residual.h's library function of the same name, the code
// the logit lens is checked against; Python only picks positions (pos_slice) and labels.
#include "analysis/residual.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "python/run.h"

namespace pyag {

namespace {

using Model = nn::CausalLM<float>;

// TransformerLens's layer: None or -1 = every block and the final residual (n_layers); others as given
// (the library checks the range).
int layer_of(const Model& model, py::handle value) {
  if (value.is_none()) return model.shape.n_layers;
  const int64_t l = int_of(value, "layer");
  if (l == -1) return model.shape.n_layers;
  if (l < -1 || l > model.shape.n_layers)
    throw std::invalid_argument("layer: expected 0.." + std::to_string(model.shape.n_layers) +
                                ", -1 or None (every block and the final residual), got " +
                                std::to_string(l));
  return static_cast<int>(l);
}

// The cache's arrays for the library, through the Python lookup (which slices positions and names a
// missing point).
analysis::CacheLookup<float> lookup_of(py::object lookup) {
  return [lookup](const std::string& point) {
    return tensor_from_array<float>(lookup(point), "cache[" + point + "]");
  };
}

py::tuple stack_tuple(const analysis::ResidualStack& s) {
  return py::make_tuple(tensor_view(s.stack, true), py::cast(s.labels));
}

// A Python bool (TypeError naming the argument for anything else, as the module's other flags).
bool flag(py::handle value, const std::string& argument) {
  if (!py::isinstance<py::bool_>(value))
    throw py::type_error(argument + ": expected True or False, got " + type_name(value));
  return value.cast<bool>();
}

ag::Tensor<double> stack_of(py::handle value) {
  return tensor_from_array<double>(value, "residual_stack");
}

}  // namespace

void bind_cache(py::module_& m) {
  py::module_ impl = m.def_submodule("_cache_impl", "The library calls behind ActivationCache's helpers.");
  impl.def("accumulated_resid",
           [](const Run& r, py::object lookup, py::object layer, py::handle incl_mid, py::handle mlp_input) {
             const auto run = r.get();
             return stack_tuple(
                 analysis::accumulated_resid(*run->model, lookup_of(lookup), layer_of(*run->model, layer),
                                             flag(incl_mid, "incl_mid"), flag(mlp_input, "mlp_input")));
           });
  impl.def("decompose_resid", [](const Run& r, py::object lookup, py::object layer, py::handle mlp_input,
                                 py::handle mode, py::handle incl_embeds) {
    if (!py::isinstance<py::str>(mode))
      throw py::type_error("mode: expected \"all\", \"attn\" or \"mlp\", got " + type_name(mode));
    const auto run = r.get();
    return stack_tuple(analysis::decompose_resid(*run->model, lookup_of(lookup), layer_of(*run->model, layer),
                                                 flag(mlp_input, "mlp_input"), mode.cast<std::string>(),
                                                 flag(incl_embeds, "incl_embeds")));
  });
  impl.def("stack_head_results", [](const Run& r, py::object lookup, py::object layer) {
    const auto run = r.get();
    return stack_tuple(
        analysis::stack_head_results(*run->model, lookup_of(lookup), layer_of(*run->model, layer)));
  });
  impl.def("apply_ln_to_stack",
           [](const Run& r, py::object lookup, py::handle stack, py::object layer, py::handle mlp_input) {
             const auto run = r.get();
             return tensor_view(
                 analysis::apply_ln_to_stack(*run->model, lookup_of(lookup), stack_of(stack),
                                             layer_of(*run->model, layer), flag(mlp_input, "mlp_input")),
                 true);
           });
  impl.def("logit_attrs", [](const Run& r, py::handle stack, py::handle tokens, py::handle incorrect) {
    const auto run = r.get();
    const int token = r.token(*run, tokens, "tokens");
    const int wrong = incorrect.is_none() ? -1 : r.token(*run, incorrect, "incorrect_tokens");
    return tensor_view(analysis::logit_attrs(*run->model, stack_of(stack), token, wrong), true);
  });
}

}  // namespace pyag
