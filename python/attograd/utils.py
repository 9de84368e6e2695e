"""attograd.utils: TransformerLens's utils that name hook points (get_act_name), giving attograd's point
names."""

_ALIASES = {"a": "attn.pattern", "attn": "attn.pattern", "pattern": "attn.pattern", "q": "attn.q",
            "k": "attn.k", "v": "attn.v", "z": "attn.z", "result": "attn.result", "attn_scores": "attn.scores",
            "scores": "attn.scores", "attn_out": "attn.out", "pre": "mlp.pre", "post": "mlp.post",
            "mlp_pre": "mlp.pre", "mlp_post": "mlp.post", "gate": "mlp.gate", "mlp_out": "mlp.out",
            "resid_pre": "resid_pre", "resid_mid": "resid_mid", "resid_post": "resid_post",
            "normalized": "out", "scale": "scale", "embed": "embed", "pos_embed": "pos_embed",
            "logits": "logits"}
_GLOBAL = {"embed", "pos_embed", "logits"}


def get_act_name(name, layer=None, layer_type=None):
    """A hook point's attograd name from TransformerLens's short name, as utils.get_act_name:
    get_act_name("z", 1) == "blocks.1.attn.z"; ("scale", 0, "ln2") == "blocks.0.ln2.scale"; ("scale")
    == "ln_f.scale"; ("embed") == "embed"."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type(name).__name__}")
    if layer is not None and (not isinstance(layer, int) or isinstance(layer, bool) or layer < 0):
        raise ValueError(f"layer: expected a non-negative int or None, got {layer!r}")
    if layer_type is not None and layer_type not in ("attn", "mlp", "ln1", "ln2"):
        raise ValueError(f"layer_type: expected 'attn', 'mlp', 'ln1', 'ln2' or None, got {layer_type!r}")
    if name not in _ALIASES:
        raise ValueError(f"name: expected one of {', '.join(sorted(_ALIASES))}, got {name!r}")
    point = _ALIASES[name]
    if point in ("scale", "out"):
        if layer is None:
            return "ln_f." + point
        norm = layer_type if layer_type in ("ln1", "ln2") else ("ln2" if layer_type == "mlp" else "ln1")
        return f"blocks.{layer}.{norm}.{point}"
    if point in _GLOBAL:
        return point
    if layer is None:
        raise ValueError(f"layer: {name!r} is a point of a block, give its layer")
    return f"blocks.{layer}.{point}"
