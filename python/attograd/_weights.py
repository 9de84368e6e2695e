"""The Run's weights in TransformerLens's names and shapes (W_E, W_pos, W_Q, ..., W_U, b_U, QK, OV) as
properties with validating setters, load_state_dict and save, which attach() gives attograd.Run. Which
parameter each weight is, and which kv head each query head reads, come from the model's view
(_weights_impl.view, nn/model_view.h); the layout (PyTorch's (out, in) weights split into heads) is
arranged here; every write goes through
attograd._weights_impl.set_parameter (python/weights.cpp), which checks the name, shape and values as the
checkpoint loader does, and save through train::save_model_run."""
import numpy as _np

from . import _core

_impl = _core._weights_impl


def _view(run):
    """The model's view: parameter names by role ({"layers": [{"query": {"weight", "bias"}, ...}], ...}),
    kv_head per query head, n_heads, n_kv_heads, d_head."""
    return _impl.view(run)


def _shape(run):
    """(n_layers, n_heads, d_model, d_head) of the run's model."""
    m = run.config["model"]
    v = _view(run)
    return m["n_layers"], v["n_heads"], m["d_model"], v["d_head"]


def _checked(value, name, shape):
    """value as a float32 array of exactly `shape` (ValueError naming `name` otherwise)."""
    a = _np.asarray(value)
    if a.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {a.shape}")
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected a float array, got dtype {a.dtype}")
    return a.astype(_np.float32)


def _whole(role, transpose=False):
    """A parameter held as one array in every model, by its role in the view (e.g. ("unembed", "weight")):
    (get, set) in TransformerLens's layout. A tied unembedding is the token embedding's weight."""
    def which(self):
        v = _view(self)
        for key in role:
            v = v.get(key) if v is not None else None
        return v

    def get(self):
        param = which(self)
        if param is None:
            raise AttributeError("/".join(role) + ": not in this model")
        p = self.parameters()[param]
        return (p.T if transpose else p).copy()

    def set(self, value, name=None):
        param = which(self)
        if param is None:
            raise ValueError(f"{name}: this model has no {'/'.join(role)}")
        shape = self.parameters()[param].shape
        a = _checked(value, name, shape[::-1] if transpose else shape)
        _impl.set_parameter(self, param, a.T if transpose else a, name)
    return get, set


def _per_layer(role, part, to_tl, from_tl, shape_of):
    """A projection of every block by its role in the view ("query", "up", ...) and part ("weight" or
    "bias"), stacked over layers: to_tl(w, run) turns one block's PyTorch array into TransformerLens's,
    from_tl back."""
    label = ("mlp." if role in ("up", "gate", "down") else "attn.") + role + "." + part

    def names(self):
        out = [layer.get(role, {}).get(part) for layer in _view(self)["layers"]]
        return out if all(n is not None for n in out) else None

    def get(self):
        params = names(self)
        if params is None:
            raise AttributeError(f"{label}: not in this model")
        p = self.parameters()
        return _np.stack([to_tl(p[n], self) for n in params])

    def set(self, value, name=None):
        params = names(self)
        if params is None:
            raise ValueError(f"{name}: this model has no {label}")
        a = _checked(value, name, shape_of(self))
        for layer, param in enumerate(params):
            _impl.set_parameter(self, param, from_tl(a[layer], self), name)
    return get, set


def _kv_heads(run):
    """The key and value heads per layer (grouped-query attention)."""
    return _view(run)["n_kv_heads"]


def _heads_in(w, run):
    """(H * dk, D) -> (H, D, dk): head h's columns of x W^T (Hkv heads for Wk and Wv)."""
    L, H, D, dk = _shape(run)
    return w.reshape(w.shape[0] // dk, dk, D).transpose(0, 2, 1)


def _heads_in_back(a, run):
    """_heads_in's inverse: (H, D, dk) -> (H * dk, D)."""
    L, H, D, dk = _shape(run)
    return _np.ascontiguousarray(a.transpose(0, 2, 1).reshape(a.shape[0] * dk, D))


def _heads_out(w, run):
    """(D, H * dk) -> (H, dk, D): head h's rows of W_O."""
    L, H, D, dk = _shape(run)
    return w.T.reshape(H, dk, D)


def _heads_out_back(a, run):
    """_heads_out's inverse: (H, dk, D) -> (D, H * dk)."""
    L, H, D, dk = _shape(run)
    return _np.ascontiguousarray(a.reshape(H * dk, D).T)


def _bias_heads(b, run):
    """A bias (H * dk,) split into heads: (H, dk)."""
    L, H, D, dk = _shape(run)
    return b.reshape(b.shape[0] // dk, dk)


_props = {
    "W_E": _whole(("token_embedding",)),
    "W_pos": _whole(("position_embedding",)),
    "W_U": _whole(("unembed", "weight"), transpose=True),
    "b_U": _whole(("unembed", "bias")),
}
for _x, _role in (("Q", "query"), ("K", "key"), ("V", "value")):
    # W_K, W_V, b_K and b_V have the kv heads (TransformerLens's _W_K of a grouped-query model).
    _heads = (lambda r: _shape(r)[1]) if _x == "Q" else _kv_heads
    _props["W_" + _x] = _per_layer(_role, "weight", _heads_in, _heads_in_back,
                                   lambda r, n=_heads: (_shape(r)[0], n(r), _shape(r)[2], _shape(r)[3]))
    _props["b_" + _x] = _per_layer(_role, "bias", _bias_heads, lambda a, r: a.reshape(-1),
                                   lambda r, n=_heads: (_shape(r)[0], n(r), _shape(r)[3]))
_props["W_O"] = _per_layer("output", "weight", _heads_out, _heads_out_back,
                           lambda r: (_shape(r)[0], _shape(r)[1], _shape(r)[3], _shape(r)[2]))
_props["b_O"] = _per_layer("output", "bias", lambda b, r: b, lambda a, r: a,
                           lambda r: (_shape(r)[0], _shape(r)[2]))
_props["W_in"] = _per_layer("up", "weight", lambda w, r: w.T, lambda a, r: _np.ascontiguousarray(a.T),
                            lambda r: (_shape(r)[0], _shape(r)[2], r.config["model"]["d_ff"]))
_props["b_in"] = _per_layer("up", "bias", lambda b, r: b, lambda a, r: a,
                            lambda r: (_shape(r)[0], r.config["model"]["d_ff"]))
# A gated MLP's gate (model.activation swiglu or geglu), TransformerLens's W_gate; b_gate its bias.
_props["W_gate"] = _per_layer("gate", "weight", lambda w, r: w.T, lambda a, r: _np.ascontiguousarray(a.T),
                              lambda r: (_shape(r)[0], _shape(r)[2], r.config["model"]["d_ff"]))
_props["b_gate"] = _per_layer("gate", "bias", lambda b, r: b, lambda a, r: a,
                              lambda r: (_shape(r)[0], r.config["model"]["d_ff"]))
_props["W_out"] = _per_layer("down", "weight", lambda w, r: w.T, lambda a, r: _np.ascontiguousarray(a.T),
                             lambda r: (_shape(r)[0], r.config["model"]["d_ff"], _shape(r)[2]))
_props["b_out"] = _per_layer("down", "bias", lambda b, r: b, lambda a, r: a,
                             lambda r: (_shape(r)[0], _shape(r)[2]))

_SHAPES = {
    "W_E": "(d_vocab, d_model)", "W_pos": "(n_ctx, d_model)", "W_U": "(d_model, d_vocab)", "b_U": "(d_vocab,)",
    "W_Q": "(n_layers, n_heads, d_model, d_head)", "W_K": "(n_layers, n_kv_heads, d_model, d_head)",
    "W_V": "(n_layers, n_kv_heads, d_model, d_head)", "W_O": "(n_layers, n_heads, d_head, d_model)",
    "b_Q": "(n_layers, n_heads, d_head)", "b_K": "(n_layers, n_kv_heads, d_head)",
    "b_V": "(n_layers, n_kv_heads, d_head)",
    "b_O": "(n_layers, d_model)", "W_in": "(n_layers, d_model, d_mlp)", "b_in": "(n_layers, d_mlp)",
    "W_gate": "(n_layers, d_model, d_mlp)", "b_gate": "(n_layers, d_mlp)",
    "W_out": "(n_layers, d_mlp, d_model)", "b_out": "(n_layers, d_model)",
}


def _property(name, get, set):
    """The Run property `name` over a (get, set) pair, documented with its TransformerLens shape."""
    return property(get, lambda self, value: set(self, value, name),
                    doc=f"TransformerLens's {name} {_SHAPES[name]}, a copy; assigning one of that shape writes "
                        "it into the model (one-line ValueError otherwise).")


def _per_query_head(a, run):
    """(n_layers, n_kv_heads, ...) -> (n_layers, n_heads, ...): each query head's kv head (the view's)."""
    return a[:, _view(run)["kv_head"]]


def load_state_dict(self, state_dict, strict=True):
    """Sets parameters from {PyTorch state_dict name: array} (run.parameters()'s names and shapes). Every name
    and shape is checked before any is written; strict (the default) also wants every parameter."""
    if not isinstance(state_dict, dict):
        raise TypeError("state_dict: expected a dict {name: array}, got " + type(state_dict).__name__)
    params = self.parameters()
    checked = {}
    for key, value in state_dict.items():
        if key not in params:
            raise ValueError(f"state_dict: no parameter {key!s} in this model (e.g. {next(iter(params))})")
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        checked[key] = _checked(value, f"state_dict[{key}]", params[key].shape)
    if strict:
        missing = [k for k in params if k not in state_dict]
        if missing:
            raise ValueError(f"state_dict: missing {len(missing)} parameter(s), first {missing[0]} "
                             "(strict=False sets only those given)")
    for key, value in checked.items():
        _impl.set_parameter(self, key, value, f"state_dict[{key}]")


def save(self, path):
    """Writes the model as it is now (its weights as set) to a new run folder `path` that every tool and
    attograd.load_run open: config.json and checkpoint/ (the optimiser's moments zero)."""
    if not isinstance(path, str):
        raise TypeError("path: expected a folder path (str), got " + type(path).__name__)
    _impl.save(self, path)


def attach(run_class):
    """Gives run_class (attograd.Run) the weight properties W_E, ..., b_out, QK and OV, load_state_dict and
    save; attograd/__init__.py calls it once."""
    for name, (get, set) in _props.items():
        setattr(run_class, name, _property(name, get, set))
    run_class.QK = property(lambda self: self.W_Q @ _np.swapaxes(_per_query_head(self.W_K, self), -1, -2),
                            doc="W_Q W_K^T per head: (n_layers, n_heads, d_model, d_model), queries' rows by "
                                "keys' columns.")
    run_class.OV = property(lambda self: _per_query_head(self.W_V, self) @ self.W_O,
                            doc="W_V W_O per head: (n_layers, n_heads, d_model, d_model), what a head writes "
                                "per unit read.")
    run_class.load_state_dict = load_state_dict
    run_class.save = save
