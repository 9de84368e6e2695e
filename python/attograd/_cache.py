"""attograd.ActivationCache: what Run.run_with_cache returns, a dict {hook point: array} with
TransformerLens's helpers (accumulated_resid, decompose_resid, stack_head_results, apply_ln_to_stack,
logit_attrs, stack_activation, remove_batch_dim, get_full_resid_decomposition) and keys (its point names, cache["pattern", 0]). Each helper is one call of study/residual.h's library function of the same name, bound in
python/cache.cpp as attograd._cache_impl; Python only picks positions (pos_slice) and labels."""
import numpy as _np

from . import _core, _tl, utils

_impl = _core._cache_impl


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
    """A residual stack as a float64 array (TypeError naming residual_stack otherwise)."""
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
    library code as `attograd lens` (study/residual.h). `model` is the Run."""

    def __init__(self, values, model):
        """values: {hook point: array}; model: the Run they came from."""
        super().__init__(values)
        self.model = model
        self.has_batch_dim = True

    def __repr__(self):
        return "ActivationCache with keys " + repr(list(self.keys()))

    def _key(self, key):
        """attograd's point name of a key: TransformerLens's name ("blocks.0.attn.hook_pattern") or a tuple
        (name, layer[, layer_type]) as utils.get_act_name takes it (("pattern", 0))."""
        if isinstance(key, tuple):
            key = utils.get_act_name(*key)
        return _tl.point(key, self.model)

    def __getitem__(self, key):
        return super().__getitem__(self._key(key))

    def __contains__(self, key):
        return super().__contains__(self._key(key))

    def get(self, key, default=None):
        return super().get(self._key(key), default)

    def remove_batch_dim(self):
        """Drops the batch axis of every value of a batch of one, in place (TransformerLens's); the helpers
        then return stacks without it too."""
        if not self.has_batch_dim:
            return
        for point, value in self.items():
            if _np.shape(value)[0] != 1:
                raise ValueError(f"remove_batch_dim: {point} has a batch of {_np.shape(value)[0]}; only a batch "
                                 "of one loses its axis")
        for point in list(self.keys()):
            super().__setitem__(point, super().__getitem__(point)[0])
        self.has_batch_dim = False

    def stack_activation(self, activation_name, layer=-1, sublayer_type=None):
        """One point of every block before layer (-1 or None: all), stacked: (layers, ...) as
        TransformerLens's; activation_name as utils.get_act_name takes it ("pattern", "resid_pre")."""
        n = self.model.config["model"]["n_layers"]
        end = n if layer is None or layer == -1 else layer
        return _np.stack([self[utils.get_act_name(activation_name, l, sublayer_type)] for l in range(end)])

    def _lookup(self, index):
        """A function point -> the cached array at the positions `index` (KeyError naming a missing point)."""
        def value(point):
            if point not in self:
                raise KeyError(point + ": not in the cache; run_with_cache with names=None or naming it")
            v = _np.asarray(self[point])
            return (v if self.has_batch_dim else v[None])[:, index]
        return value

    def _finish(self, stack, labels, drop, return_labels):
        """The stack (position axis dropped for an int pos_slice; batch axis after remove_batch_dim), with its
        labels when asked."""
        if drop:
            stack = stack[..., 0, :]
        if not self.has_batch_dim:
            stack = stack[:, 0]
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
        if not self.has_batch_dim:
            stack = stack[..., None, :, :]
        out = _impl.apply_ln_to_stack(self.model, self._lookup(index), stack, layer, mlp_input)
        if not self.has_batch_dim:
            out = out[..., 0, :, :]
        return out[..., 0, :] if drop else out

    def get_full_resid_decomposition(self, layer=None, mlp_input=False, expand_neurons=True, apply_ln=False,
                                     pos_slice=None, return_labels=False):
        """TransformerLens's: the residual entering layer (None, -1: the final one; mlp_input: its MLP) as each
        head's write ("LlHh", stack_head_results), each neuron's (mlp.post[n] times W_out[n], "LlNn"; with
        expand_neurons=False each MLP's output, "L_mlp_out"), embed, pos_embed and "bias", the sum of the
        attention (and, with expand_neurons, MLP) output biases. The rows sum to the residual. Shape (n, B, T, D)
        in float64."""
        m = self.model.config["model"]
        n = m["n_layers"]
        end = n if layer is None or layer == -1 else layer
        if not isinstance(end, int) or not 0 <= end <= n or (mlp_input and end == n):
            raise ValueError(f"layer: expected 0..{n - 1 if mlp_input else n} (or None, -1), got {layer!r}")
        index, drop = _positions(pos_slice)
        heads, labels = self.stack_head_results(end + (1 if mlp_input else 0), return_labels=True)
        parts = [_np.asarray(heads, _np.float64).reshape((-1,) + _np.shape(self["blocks.0.resid_pre"]))]
        mlps = [] if m.get("attention_only") else list(range(end))
        if expand_neurons:
            for l in mlps:
                post = _np.asarray(self[f"blocks.{l}.mlp.post"], _np.float64)
                w_out = _np.asarray(self.model.W_out[l], _np.float64)
                parts.append(_np.moveaxis(post[..., :, None] * w_out, -2, 0))
                labels = labels + [f"L{l}N{i}" for i in range(w_out.shape[0])]
        else:
            for l in mlps:
                parts.append(_np.asarray(self[f"blocks.{l}.mlp.out"], _np.float64)[None])
                labels = labels + [f"{l}_mlp_out"]
        for point in ("embed", "pos_embed"):
            if point in self:
                parts.append(_np.asarray(self[point], _np.float64)[None])
                labels = labels + [point]
        bias = _np.zeros(m["d_model"])
        for name, upto in (("b_O", end + (1 if mlp_input else 0)), ("b_out", end if expand_neurons else 0)):
            try:
                bias = bias + _np.asarray(getattr(self.model, name), _np.float64)[:upto].sum(axis=0)
            except AttributeError:  # a model without biases
                pass
        parts.append(_np.broadcast_to(bias, parts[0].shape[1:])[None])
        stack = _np.concatenate(parts)
        labels = labels + ["bias"]
        if apply_ln:
            stack = self.apply_ln_to_stack(stack, None if end == n else end, mlp_input)
        stack = stack[..., index, :]
        if drop:
            stack = stack[..., 0, :]
        return (stack, labels) if return_labels else stack

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None):
        """Each piece's direct logit attribution: stack (..., D) times W_U[tokens] - W_U[incorrect_tokens]
        (a token name or id each; W_U[tokens] alone without incorrect_tokens). Shape (...)."""
        return _impl.logit_attrs(self.model, _floats(residual_stack), tokens, incorrect_tokens)
