"""TransformerLens's names on attograd's Run: the keyword aliases (fwd_hooks=, names_filter=,
max_new_tokens=, prepend_bos=), TransformerLens's hook point names, model(ids), model.cfg, to_single_token,
to_string and generate(input). attach() wraps the bound methods once (attograd/__init__.py); attograd's own
names keep working, and each alias is only renamed here: the work is the C++ method's (docs/python.md)."""
import re

import numpy as _np

# TransformerLens's hook point names and attograd's, once: {L} is the block. The gated MLP's two are
# model-dependent (_GATED): TransformerLens's hook_pre is the gate's output there, hook_pre_linear the up
# projection (attograd's mlp.gate and mlp.pre).
_POINTS = [
    ("hook_embed", "embed"), ("hook_pos_embed", "pos_embed"),
    ("blocks.{L}.hook_resid_pre", "blocks.{L}.resid_pre"),
    ("blocks.{L}.hook_resid_mid", "blocks.{L}.resid_mid"),
    ("blocks.{L}.hook_resid_post", "blocks.{L}.resid_post"),
    ("blocks.{L}.hook_attn_out", "blocks.{L}.attn.out"), ("blocks.{L}.hook_mlp_out", "blocks.{L}.mlp.out"),
    ("blocks.{L}.ln1.hook_scale", "blocks.{L}.ln1.scale"), ("blocks.{L}.ln1.hook_normalized", "blocks.{L}.ln1.out"),
    ("blocks.{L}.ln2.hook_scale", "blocks.{L}.ln2.scale"), ("blocks.{L}.ln2.hook_normalized", "blocks.{L}.ln2.out"),
    ("blocks.{L}.attn.hook_q", "blocks.{L}.attn.q"), ("blocks.{L}.attn.hook_k", "blocks.{L}.attn.k"),
    ("blocks.{L}.attn.hook_v", "blocks.{L}.attn.v"), ("blocks.{L}.attn.hook_z", "blocks.{L}.attn.z"),
    ("blocks.{L}.attn.hook_attn_scores", "blocks.{L}.attn.scores"),
    ("blocks.{L}.attn.hook_pattern", "blocks.{L}.attn.pattern"),
    ("blocks.{L}.attn.hook_result", "blocks.{L}.attn.result"),
    ("blocks.{L}.mlp.hook_post", "blocks.{L}.mlp.post"),
    ("ln_final.hook_scale", "ln_f.scale"), ("ln_final.hook_normalized", "ln_f.out"),
]
_PLAIN = [("blocks.{L}.mlp.hook_pre", "blocks.{L}.mlp.pre")]
_GATED = [("blocks.{L}.mlp.hook_pre", "blocks.{L}.mlp.gate"), ("blocks.{L}.mlp.hook_pre_linear", "blocks.{L}.mlp.pre")]


def _pattern(template):
    return re.compile("^" + re.escape(template).replace(re.escape("{L}"), r"(\d+)") + "$")


_TABLES = {gated: [(_pattern(tl), tl, _pattern(ours), ours) for tl, ours in _POINTS + (_GATED if gated else _PLAIN)]
           for gated in (False, True)}


def _gated(run):
    return run.config["model"]["activation"] in ("swiglu", "geglu")


def point(name, run):
    """attograd's name of a hook point given by either name (TransformerLens's "blocks.0.attn.hook_pattern"
    is "blocks.0.attn.pattern"); other strings come back as they are, for the forward to judge."""
    if not isinstance(name, str) or "hook_" not in name:
        return name
    for tl_re, _, _, ours in _TABLES[_gated(run)]:
        m = tl_re.match(name)
        if m:
            return ours.replace("{L}", m.group(1)) if m.groups() else ours
    return name


def tl_name(name, run):
    """TransformerLens's name of attograd's point, or None when it has none."""
    for _, tl, ours_re, _ in _TABLES[_gated(run)]:
        m = ours_re.match(name)
        if m:
            return tl.replace("{L}", m.group(1)) if m.groups() else tl
    return None


def _filter(f, run):
    """A names filter or hook key in either naming: a name, a list of names, or a function of a name that
    is asked about both of a point's names."""
    if isinstance(f, str):
        return point(f, run)
    if isinstance(f, (list, tuple)):
        return [point(n, run) for n in f]
    if callable(f):
        def picks(name):
            if f(name):
                return True
            other = tl_name(name, run)
            return other is not None and bool(f(other))
        return picks
    return f


def _hooks(hooks, run):
    """hooks / fwd_hooks with TransformerLens's point names or filters made attograd's."""
    if isinstance(hooks, dict):
        return {point(k, run): fn for k, fn in hooks.items()}
    if isinstance(hooks, (list, tuple)):
        return [(_filter(pair[0], run), pair[1]) if isinstance(pair, (list, tuple)) and len(pair) == 2 else pair
                for pair in hooks]
    return hooks


def _alias(kwargs, fname, theirs, ours):
    """Renames TransformerLens's keyword `theirs` to attograd's `ours` (TypeError when both are given)."""
    if theirs in kwargs:
        if ours in kwargs:
            raise TypeError(f"{fname}() got both {theirs} and {ours} (the same argument, by two names)")
        kwargs[ours] = kwargs.pop(theirs)


def _ids(run, value, prepend_bos):
    """Text (TransformerLens's model("text")) as to_tokens makes it; anything else as given."""
    if isinstance(value, str) or (isinstance(value, list) and value and isinstance(value[0], str)):
        return run.to_tokens(value, prepend_bos=prepend_bos)
    return value


def _forward_like(method, fname):
    """forward, run_with_hooks and run_with_cache taking fwd_hooks=, names_filter= and text input."""
    def call(self, input=None, *args, prepend_bos=True, **kwargs):
        _alias(kwargs, fname, "tokens", "ids")
        if input is None and "ids" in kwargs:
            input = kwargs.pop("ids")
        _alias(kwargs, fname, "fwd_hooks", "hooks")
        _alias(kwargs, fname, "names_filter", "names")
        if "hooks" in kwargs:
            kwargs["hooks"] = _hooks(kwargs["hooks"], self)
        if "names" in kwargs:
            kwargs["names"] = _filter(kwargs["names"], self)
        if "bwd_hooks" in kwargs:
            kwargs["bwd_hooks"] = _hooks(kwargs["bwd_hooks"], self)
        if args:  # hooks (forward) or names (run_with_cache) given by position
            args = (_filter(args[0], self) if fname == "run_with_cache" else _hooks(args[0], self),) + args[1:]
        return method(self, _ids(self, input, prepend_bos), *args, **kwargs)
    call.__name__, call.__doc__ = fname, method.__doc__ + (
        " TransformerLens's fwd_hooks= and names_filter= are hooks= and names=; text input is to_tokens'd "
        "(prepend_bos).")
    return call


def _generate(method):
    def generate(self, input=None, *args, **kwargs):
        """generate(input, max_new_tokens=...): TransformerLens's generate on attograd's (returns its dict).
        input is text (as prompt=: the tokenizer's, BOS put in front unless prepend_bos=False), or ids of
        shape (T,) or (1, T) (as tokens=, taken as given)."""
        _alias(kwargs, "generate", "max_new_tokens", "max_new")
        if input is not None and not args:
            if isinstance(input, str) and "prompt" not in kwargs:  # with prompt= it is tokens= (names)
                kwargs["prompt"] = input
                input = None
            elif not isinstance(input, (list, tuple)) or (input and isinstance(input[0], (list, tuple))):
                a = _np.asarray(input.detach().cpu() if hasattr(input, "detach") else input)
                if a.ndim == 2:
                    if a.shape[0] != 1:
                        raise ValueError(f"tokens: expected one sequence, shape (T,) or (1, T), got shape {a.shape}")
                    a = a[0]
                input = a
        if input is not None:
            args = (input,) + args
        return method(self, *args, **kwargs)
    generate.__doc__ += "\n\n" + (method.__doc__ or "")
    return generate


class Config:
    """TransformerLens's model.cfg read from attograd's config: n_layers, d_model, n_heads, d_head, d_mlp,
    d_vocab, n_ctx, act_fn, normalization_type, positional_embedding_type, and a few more. A snapshot:
    attograd's own config is run.config."""

    def __init__(self, run):
        m = run.config["model"]
        self.n_layers = m["n_layers"]
        self.d_model = m["d_model"]
        self.n_heads = m["n_heads"]
        self.d_head = m["d_model"] // m["n_heads"]
        self.n_key_value_heads = m.get("n_kv_heads") or m["n_heads"]
        self.d_mlp = None if m.get("attention_only") else m["d_ff"]
        self.d_vocab = self.d_vocab_out = m["vocab"]
        self.n_ctx = m["max_len"]
        act = m["activation"]
        self.act_fn = {"gelu": "gelu_new", "gelu_erf": "gelu", "relu": "relu", "relu2": "relu2",
                       "swiglu": "silu", "geglu": "gelu_new"}.get(act, act)
        self.gated_mlp = act in ("swiglu", "geglu")
        self.normalization_type = {"layer": "LN", "rms": "RMS", "none": None}.get(m["norm"], m["norm"])
        self.positional_embedding_type = {"learned": "standard"}.get(m["positions"], m["positions"])
        self.eps = m["norm_eps"]
        self.attn_only = bool(m.get("attention_only"))
        self.parallel_attn_mlp = bool(m.get("parallel"))
        self.tokenizer_prepends_bos = self.default_prepend_bos = True

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in vars(self).items()) + ")"


def to_single_token(self, string):
    """The id of the one token `string` is (text for a tokenizer's run, else a token name); ValueError when it
    is not exactly one."""
    if not isinstance(string, str):
        raise TypeError("string: expected a str, got " + type(string).__name__)
    ids = self.to_tokens(string, prepend_bos=False)[0]
    if len(ids) != 1:
        raise ValueError(f"to_single_token: {string!r} is {len(ids)} tokens {self.token_names(ids)}, not one "
                         "(a leading space is part of a word's token: ' the')")
    return int(ids[0])


def to_string(self, tokens):
    """Ids (T,) as text (the tokenizer's decoding; token names joined by spaces for a task without one); ids
    (B, T) as a list of texts."""
    a = _np.asarray(tokens.detach().cpu() if hasattr(tokens, "detach") else tokens)
    if a.ndim == 0:
        a = a[None]
    if a.dtype.kind not in "iu":
        raise ValueError(f"tokens: expected integer ids, got dtype {a.dtype}")
    if a.ndim == 2:
        return [self._decode([int(i) for i in row]) for row in a]
    if a.ndim != 1:
        raise ValueError(f"tokens: expected shape (T,) or (B, T), got {a.shape}")
    return self._decode([int(i) for i in a])


def attach(run_class):
    """Gives run_class (attograd.Run) TransformerLens's names; attograd/__init__.py calls it once."""
    for name in ("forward", "run_with_hooks", "run_with_cache"):
        setattr(run_class, name, _forward_like(getattr(run_class, name), name))
    run_class.__call__ = run_class.forward
    run_class.generate = _generate(run_class.generate)
    run_class.cfg = property(Config, doc="TransformerLens's model.cfg (attograd._tl.Config).")
    run_class.to_single_token = to_single_token
    run_class.to_string = to_string
