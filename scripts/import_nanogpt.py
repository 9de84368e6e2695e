#!/usr/bin/env python3
"""Writes a nanoGPT checkpoint as a Hugging Face GPT-2 folder that `attograd import` reads.

Usage: scripts/import_nanogpt.py ckpt.pt OUT_DIR [--meta meta.pkl]
       attograd import OUT_DIR --out RUN

Needs python3-torch (nanoGPT's checkpoint is a pickle: only torch reads it). ckpt.pt is what nanoGPT's
train.py saves: {"model_args": {n_layer, n_head, n_embd, block_size, bias, vocab_size, ...}, "model": the
state dict} (a torch.compile'd model's names carry the prefix "_orig_mod.", which is dropped). nanoGPT's
GPT is GPT-2's layout with nn.Linear weights (out, in) where GPT-2's Conv1D stores (in, out), so the four
2-D linear weights of each block are transposed; `bias: False` (no biases in the linears and LayerNorms)
becomes zero biases; its MLP's nn.GELU() is the exact GELU ("activation_function": "gelu"); lm_head is
tied to wte.

OUT_DIR gets config.json (model_type gpt2), model.safetensors (F32, written by hand: an 8-byte
little-endian header length, the JSON header, the raw data) and, from a character-level meta.pkl
({"stoi", "itos", "vocab_size"}; by default the one beside ckpt.pt), chars.txt: every character of the
vocabulary in id order, repeated to fill a text task's windows. nanoGPT numbers its characters in sorted
order, as attograd's char text unit does, so `attograd import` makes it the run's text task and prompts are
text (`generate --prompt "ROMEO:"`). Errors are one line naming the file and field, exit 2.
"""
import argparse
import json
import math
import pickle
import struct
import sys
from pathlib import Path


def fail(message):
    print(f"import_nanogpt.py: {message}", file=sys.stderr)
    sys.exit(2)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().to("cpu").float().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    tmp.replace(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ckpt")
    parser.add_argument("out")
    parser.add_argument("--meta", help="nanoGPT's meta.pkl (default: meta.pkl beside ckpt, when there)")
    args = parser.parse_args()
    import torch

    try:
        ckpt = torch.load(args.ckpt, map_location="cpu")
    except Exception as e:  # a missing file, or not a torch pickle
        fail(f"{args.ckpt}: cannot read: {e}".splitlines()[0])
    if not isinstance(ckpt, dict) or "model_args" not in ckpt or "model" not in ckpt:
        fail(f"{args.ckpt}: expected nanoGPT's checkpoint, a dict with model_args and model")
    margs = ckpt["model_args"]
    for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        if not isinstance(margs.get(key), int) or margs[key] < 1:
            fail(f"{args.ckpt}: model_args.{key}: expected a positive integer, got {margs.get(key)!r}")
    L, D, V, P = margs["n_layer"], margs["n_embd"], margs["vocab_size"], margs["block_size"]
    bias = bool(margs.get("bias", True))
    prefix = "_orig_mod."
    sd = {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in ckpt["model"].items()}

    def get(name, shape):
        if name not in sd:
            fail(f"{args.ckpt}: model.{name}: missing tensor")
        t = sd[name]
        if list(t.shape) != list(shape):
            fail(f"{args.ckpt}: model.{name}: shape {list(t.shape)}, but model_args imply {list(shape)}")
        return t.float()

    def bias_of(name, n):
        return get(name, [n]) if bias else torch.zeros(n)

    out = {"transformer.wte.weight": get("transformer.wte.weight", [V, D]),
           "transformer.wpe.weight": get("transformer.wpe.weight", [P, D])}
    for l in range(L):
        h = f"transformer.h.{l}."
        out[h + "ln_1.weight"] = get(h + "ln_1.weight", [D])
        out[h + "ln_1.bias"] = bias_of(h + "ln_1.bias", D)
        # nn.Linear (out, in) -> Conv1D (in, out)
        out[h + "attn.c_attn.weight"] = get(h + "attn.c_attn.weight", [3 * D, D]).t()
        out[h + "attn.c_attn.bias"] = bias_of(h + "attn.c_attn.bias", 3 * D)
        out[h + "attn.c_proj.weight"] = get(h + "attn.c_proj.weight", [D, D]).t()
        out[h + "attn.c_proj.bias"] = bias_of(h + "attn.c_proj.bias", D)
        out[h + "ln_2.weight"] = get(h + "ln_2.weight", [D])
        out[h + "ln_2.bias"] = bias_of(h + "ln_2.bias", D)
        out[h + "mlp.c_fc.weight"] = get(h + "mlp.c_fc.weight", [4 * D, D]).t()
        out[h + "mlp.c_fc.bias"] = bias_of(h + "mlp.c_fc.bias", 4 * D)
        out[h + "mlp.c_proj.weight"] = get(h + "mlp.c_proj.weight", [D, 4 * D]).t()
        out[h + "mlp.c_proj.bias"] = bias_of(h + "mlp.c_proj.bias", D)
    out["transformer.ln_f.weight"] = get("transformer.ln_f.weight", [D])
    out["transformer.ln_f.bias"] = bias_of("transformer.ln_f.bias", D)
    if "lm_head.weight" in sd and not torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]):
        fail(f"{args.ckpt}: model.lm_head.weight: differs from transformer.wte.weight (nanoGPT ties them)")
    known = set(out) | {"lm_head.weight"} | {f"transformer.h.{l}.attn.bias" for l in range(L)}
    extra = sorted(set(sd) - known)
    if extra:
        fail(f"{args.ckpt}: model.{extra[0]}: unexpected tensor")

    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V, "n_positions": P,
              "n_embd": D, "n_layer": L, "n_head": margs["n_head"], "n_inner": None,
              "activation_function": "gelu", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
              "tie_word_embeddings": True}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(folder / "model.safetensors", out)

    meta = Path(args.meta) if args.meta else Path(args.ckpt).resolve().parent / "meta.pkl"
    if args.meta or meta.exists():
        try:
            with open(meta, "rb") as f:
                m = pickle.load(f)
        except Exception as e:
            fail(f"{meta}: cannot read: {e}".splitlines()[0])
        itos = m.get("itos") if isinstance(m, dict) else None
        if not isinstance(itos, dict) or sorted(itos) != list(range(len(itos))):
            fail(f"{meta}: itos: expected a dict of ids 0..n-1 to characters")
        chars = [itos[i] for i in range(len(itos))]
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            fail(f"{meta}: itos: expected one character per id (a character-level meta.pkl)")
        if chars != sorted(chars) or len(set(chars)) != len(chars):
            fail(f"{meta}: itos: the characters are not in sorted order, as attograd's char unit numbers them")
        if len(chars) > V:
            fail(f"{meta}: itos: {len(chars)} characters, more than model_args.vocab_size {V}")
        repeats = math.ceil(12 * (P + 1) / len(chars)) + 1
        (folder / "chars.txt").write_text("".join(chars) * repeats, encoding="utf-8")


if __name__ == "__main__":
    main()
