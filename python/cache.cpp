// attograd.ActivationCache: what Run.run_with_cache returns, a dict {hook point: array} with
// TransformerLens's helpers (accumulated_resid, decompose_resid, stack_head_results, apply_ln_to_stack,
// logit_attrs). Each helper is one call of analysis/residual.h's library function of the same name, the code
// the logit lens is checked against; Python only picks positions (pos_slice) and labels.
#include <pybind11/eval.h>

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
  py::module_ impl = m.def_submodule("_cache", "The library calls behind ActivationCache's helpers.");
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

  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  scope["__name__"] = "attograd";
  scope["_impl"] = impl;
  py::exec(R"py(
import numpy as _np


def _positions(pos_slice):
    """TransformerLens's pos_slice as an index of the position axis: None (every position), an int (that
    position, its axis dropped), a slice, or a list of positions. Returns (index, drop the axis)."""
    if pos_slice is None:
        return slice(None), False
    if isinstance(pos_slice, bool) or not isinstance(pos_slice, (int, _np.integer, slice, list, tuple, _np.ndarray)):
        raise TypeError("pos_slice: expected None, an int, a slice or a list of positions, got "
                        + type(pos_slice).__name__)
    if isinstance(pos_slice, (int, _np.integer)):
        return [int(pos_slice)], True
    if isinstance(pos_slice, slice):
        return pos_slice, False
    return [int(p) for p in pos_slice], False


def _floats(stack):
    try:
        return _np.asarray(stack, dtype=_np.float64)
    except (TypeError, ValueError):
        raise TypeError("residual_stack: expected an array of floats, got " + type(stack).__name__) from None


def _picked(f):
    """Says which argument an out-of-range position came from."""
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except IndexError as e:
            raise IndexError("pos_slice: " + str(e)) from None
    call.__name__, call.__doc__ = f.__name__, f.__doc__
    return call


class ActivationCache(dict):
    """The activations of one forward, {hook point: array} (Run.run_with_cache), with TransformerLens's
    helpers. Stacks are float64 arrays (n, B, T, D) (T dropped for an int pos_slice), computed by the same
    library code as `attograd lens` (analysis/residual.h). `model` is the Run."""

    def __init__(self, values, model):
        super().__init__(values)
        self.model = model

    def __repr__(self):
        return "ActivationCache with keys " + repr(list(self.keys()))

    def _lookup(self, index):
        def value(point):
            if point not in self:
                raise KeyError(point + ": not in the cache; run_with_cache with names=None or naming it")
            return _np.asarray(self[point])[:, index]
        return value

    def _finish(self, stack, labels, drop, return_labels):
        if drop:
            stack = stack[..., 0, :]
        return (stack, labels) if return_labels else stack

    @_picked
    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, pos_slice=None, mlp_input=False,
                          return_labels=False):
        """resid_pre of blocks 0..layer ("L_pre"; with incl_mid resid_mid too, "L_mid"), and for layer None,
        -1 or n_layers the final resid_post ("final_post"); apply_ln puts them through the norm that reads
        them (ln_f for the final). Shape (n, B, T, D)."""
        index, drop = _positions(pos_slice)
        stack, labels = _impl.accumulated_resid(self.model, self._lookup(index), layer, incl_mid, mlp_input)
        if apply_ln:
            stack = _impl.apply_ln_to_stack(self.model, self._lookup(index), stack, layer, mlp_input)
        return self._finish(stack, labels, drop, return_labels)

    @_picked
    def decompose_resid(self, layer=None, mlp_input=False, mode="all", apply_ln=False, pos_slice=None,
                        incl_embeds=True, return_labels=False):
        """embed, pos_embed, then each block's attn.out ("L_attn_out") and mlp.out ("L_mlp_out") before
        layer (mode "all", "attn" or "mlp"): the pieces that sum to blocks.layer.resid_pre (the final
        resid_post for None). Shape (n, B, T, D)."""
        index, drop = _positions(pos_slice)
        stack, labels = _impl.decompose_resid(self.model, self._lookup(index), layer, mlp_input, mode,
                                              incl_embeds)
        if apply_ln:
            stack = _impl.apply_ln_to_stack(self.model, self._lookup(index), stack, layer, mlp_input)
        return self._finish(stack, labels, drop, return_labels)

    @_picked
    def stack_head_results(self, layer=-1, return_labels=False, incl_remainder=False, pos_slice=None,
                           apply_ln=False):
        """Each head's write into the stream ("LlHh") for the blocks before layer (-1 or None: all), from
        attn.z and Wo, Wo's bias left out; incl_remainder adds "remainder", the residual at layer minus
        their sum. Shape (n_heads * layers, B, T, D)."""
        index, drop = _positions(pos_slice)
        stack, labels = _impl.stack_head_results(self.model, self._lookup(index), layer)
        if incl_remainder:
            resid = _impl.accumulated_resid(self.model, self._lookup(index), layer, False, False)[0][-1]
            stack = _np.concatenate([stack, (resid - stack.sum(axis=0))[None]]) if len(labels) else resid[None]
            labels = labels + ["remainder"]
        if apply_ln:
            stack = _impl.apply_ln_to_stack(self.model, self._lookup(index), stack, layer, False)
        return self._finish(stack, labels, drop, return_labels)

    @_picked
    def apply_ln_to_stack(self, residual_stack, layer=None, mlp_input=False, pos_slice=None):
        """A stack (..., B, T, D) through the norm that reads the residual at layer (ln_f for None, -1 or
        n_layers; ln1, or ln2 with mlp_input): centred, times the cached scale and the norm's weight, no
        bias. A stack sliced by pos_slice takes the same pos_slice here."""
        index, drop = _positions(pos_slice)
        stack = _floats(residual_stack)
        if drop:
            stack = stack[..., None, :]
        out = _impl.apply_ln_to_stack(self.model, self._lookup(index), stack, layer, mlp_input)
        return out[..., 0, :] if drop else out

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None):
        """Each piece's direct logit attribution: stack (..., D) times W_U[tokens] - W_U[incorrect_tokens]
        (a token name or id each; W_U[tokens] alone without incorrect_tokens). Shape (...)."""
        return _impl.logit_attrs(self.model, _floats(residual_stack), tokens, incorrect_tokens)
)py",
           scope);
  m.attr("ActivationCache") = scope["ActivationCache"];
}

}  // namespace pyag
