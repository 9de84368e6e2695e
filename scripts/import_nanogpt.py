#!/usr/bin/env python3
"""Writes a nanoGPT checkpoint as a Hugging Face GPT-2 folder that `attograd import` reads. No PyTorch needed.

Usage: scripts/import_nanogpt.py ckpt.pt OUT_DIR [--meta meta.pkl]
       attograd import OUT_DIR --out RUN

ckpt.pt is what nanoGPT's train.py saves: {"model_args": {n_layer, n_head, n_embd, block_size, bias,
vocab_size, ...}, "model": the state dict, and its optimizer, iter_num, best_val_loss and config} (a
torch.compile'd model's names carry the prefix "_orig_mod.", which is dropped). It is read as
scripts/convert_torch_bin.py reads a pickle: with a restricted unpickler that builds only dicts, lists,
numbers, strings and tensors, never torch.load, so a checkpoint cannot run code; only the model's tensors are
read (float32, float16 or bfloat16). Python's standard library alone. nanoGPT's GPT is GPT-2's layout with
nn.Linear weights (out, in) where GPT-2's Conv1D stores (in, out), so the four 2-D linear weights of each
block are transposed; `bias: False` (no biases in the linears and LayerNorms) becomes zero biases; its MLP's
nn.GELU() is the exact GELU ("activation_function": "gelu"); lm_head is tied to wte.

OUT_DIR gets config.json (model_type gpt2), model.safetensors (F32: an 8-byte little-endian header length,
the JSON header, the raw data) and, from a character-level meta.pkl ({"stoi", "itos", "vocab_size"}; by
default the one beside ckpt.pt), chars.txt: every character of the vocabulary in id order, repeated to
fill a text task's windows. nanoGPT numbers its characters in sorted order, as attograd's char text unit
does, so `attograd import` makes it the run's text task and prompts are text (`generate --prompt
"ROMEO:"`). Everything is read and checked before anything is written, and each file is written under a
temporary name and renamed. Errors are one line naming the file and field, exit 2.
"""
import argparse
import json
import math
import struct
import sys
import zipfile
from array import array
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts: nothing written but OUT_DIR
sys.path.insert(0, str(Path(__file__).resolve().parent))
import convert_torch_bin as torch_pickle  # noqa: E402

MAX_META_BYTES = 16 << 20  # a character vocabulary's meta.pkl


def fail(message):
    print(f"import_nanogpt.py: {message}", file=sys.stderr)
    sys.exit(2)


def write_atomically(path, chunks):
    """The byte strings `chunks` written one after another as path, under a temporary name until complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


class Tensor:
    """A float32 tensor: its shape and its elements in row-major order."""

    def __init__(self, shape, data):
        self.shape, self.data = tuple(shape), data

    def transposed(self):
        rows, cols = self.shape
        out = array("f")
        for j in range(cols):  # row j of the transpose: column j, every cols-th element from j
            out.extend(self.data[j::cols])
        return Tensor((cols, rows), out)


def zeros(n):
    return Tensor((n,), array("f", bytes(4 * n)))


def little_endian(a):
    if sys.byteorder != "little":
        a.byteswap()
    return a


def safetensors_chunks(tensors):
    """A safetensors file of the float32 tensors: the header, then each tensor's bytes in turn."""
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + 4 * len(t.data)]}
        offset += 4 * len(t.data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    yield struct.pack("<Q", len(text)) + text
    for t in tensors.values():
        yield little_endian(array("f", t.data)).tobytes()


def as_float32(t, storage_bytes):
    """A tensor of the checkpoint as a float32 Tensor."""
    data = torch_pickle.tensor_bytes(t, storage_bytes(t.storage))
    if t.storage.dtype == "F32":
        a = little_endian(array("f", data))
    elif t.storage.dtype == "F16":
        a = array("f", struct.unpack(f"<{len(data) // 2}e", data))
    elif t.storage.dtype == "BF16":  # the upper half of a float32's bits
        n = len(data) // 2
        a = little_endian(array("f", struct.pack(f"<{n}I", *(x << 16 for x in struct.unpack(f"<{n}H", data)))))
    else:
        raise torch_pickle.Refused(f"dtype {t.storage.dtype}, expected float32, float16 or bfloat16")
    return Tensor(t.shape, a)


def read_model(path):
    """model_args and the state dict's name -> float32 Tensor (names without "_orig_mod.")."""
    if not path.is_file():
        fail(f"{path}: no such file")
    try:
        ckpt, storage_bytes = torch_pickle.read_checkpoint(path)
    except torch_pickle.Refused as e:
        fail(f"{path}: {e}")
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        fail(f"{path}: cannot read: {e}".splitlines()[0])
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model_args"), dict) or \
            not isinstance(ckpt.get("model"), dict):
        fail(f"{path}: expected nanoGPT's checkpoint, a dict with model_args and model")
    margs = ckpt["model_args"]
    for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        if not isinstance(margs.get(key), int) or isinstance(margs.get(key), bool) or margs[key] < 1:
            fail(f"{path}: model_args.{key}: expected a positive integer, got {margs.get(key)!r}")
    prefix, sd, views = "_orig_mod.", {}, {}
    for name, t in ckpt["model"].items():
        if not isinstance(name, str) or not isinstance(t, torch_pickle.Tensor):
            fail(f"{path}: model.{name}: expected a tensor named by a string")
        # A tensor viewing exactly what an earlier one did (lm_head tied to wte) is that tensor, not read again.
        view = (t.storage.key, t.offset, t.shape, t.stride)
        try:
            if view not in views:
                views[view] = as_float32(t, storage_bytes)
        except (torch_pickle.Refused, ValueError, OSError, zipfile.BadZipFile) as e:
            fail(f"{path}: model.{name}: {e}".splitlines()[0])
        sd[name[len(prefix):] if name.startswith(prefix) else name] = views[view]
    return margs, sd


def gpt2_tensors(path, margs, sd):
    """transformers' GPT-2 tensors (Conv1D weights (in, out)) from nanoGPT's state dict."""
    L, D, V, P = margs["n_layer"], margs["n_embd"], margs["vocab_size"], margs["block_size"]
    bias = bool(margs.get("bias", True))

    def get(name, shape):
        if name not in sd:
            fail(f"{path}: model.{name}: missing tensor")
        if list(sd[name].shape) != list(shape):
            fail(f"{path}: model.{name}: shape {list(sd[name].shape)}, but model_args imply {list(shape)}")
        return sd[name]

    def bias_of(name, n):
        return get(name, [n]) if bias else zeros(n)

    out = {"transformer.wte.weight": get("transformer.wte.weight", [V, D]),
           "transformer.wpe.weight": get("transformer.wpe.weight", [P, D])}
    for l in range(L):
        h = f"transformer.h.{l}."
        out[h + "ln_1.weight"] = get(h + "ln_1.weight", [D])
        out[h + "ln_1.bias"] = bias_of(h + "ln_1.bias", D)
        # nn.Linear (out, in) -> Conv1D (in, out)
        out[h + "attn.c_attn.weight"] = get(h + "attn.c_attn.weight", [3 * D, D]).transposed()
        out[h + "attn.c_attn.bias"] = bias_of(h + "attn.c_attn.bias", 3 * D)
        out[h + "attn.c_proj.weight"] = get(h + "attn.c_proj.weight", [D, D]).transposed()
        out[h + "attn.c_proj.bias"] = bias_of(h + "attn.c_proj.bias", D)
        out[h + "ln_2.weight"] = get(h + "ln_2.weight", [D])
        out[h + "ln_2.bias"] = bias_of(h + "ln_2.bias", D)
        out[h + "mlp.c_fc.weight"] = get(h + "mlp.c_fc.weight", [4 * D, D]).transposed()
        out[h + "mlp.c_fc.bias"] = bias_of(h + "mlp.c_fc.bias", 4 * D)
        out[h + "mlp.c_proj.weight"] = get(h + "mlp.c_proj.weight", [D, 4 * D]).transposed()
        out[h + "mlp.c_proj.bias"] = bias_of(h + "mlp.c_proj.bias", D)
    out["transformer.ln_f.weight"] = get("transformer.ln_f.weight", [D])
    out["transformer.ln_f.bias"] = bias_of("transformer.ln_f.bias", D)
    if "lm_head.weight" in sd and (sd["lm_head.weight"].shape, sd["lm_head.weight"].data) != (
            sd["transformer.wte.weight"].shape, sd["transformer.wte.weight"].data):
        fail(f"{path}: model.lm_head.weight: differs from transformer.wte.weight (nanoGPT ties them)")
    known = set(out) | {"lm_head.weight"} | {f"transformer.h.{l}.attn.bias" for l in range(L)}
    extra = sorted(set(sd) - known)
    if extra:
        fail(f"{path}: model.{extra[0]}: unexpected tensor")
    return out


def read_chars(meta, vocab):
    """The characters of a character-level meta.pkl, in id order (a plain pickle of strings and ints,
    read with the same restricted unpickler)."""
    try:
        if meta.stat().st_size > MAX_META_BYTES:
            fail(f"{meta}: more than {MAX_META_BYTES} bytes, expected a character vocabulary")
        with open(meta, "rb") as f:
            m = torch_pickle.Unpickler(f).load()
    except torch_pickle.Refused as e:
        fail(f"{meta}: {e}")
    except Exception as e:  # a missing file, or a malformed pickle: any of the unpickler's own errors
        fail(f"{meta}: cannot read: {e}".splitlines()[0])
    itos = m.get("itos") if isinstance(m, dict) else None
    if not isinstance(itos, dict) or any(type(k) is not int for k in itos) or set(itos) != set(range(len(itos))):
        fail(f"{meta}: itos: expected a dict of ids 0..n-1 to characters")
    chars = [itos[i] for i in range(len(itos))]
    if any(not isinstance(c, str) or len(c) != 1 for c in chars):
        fail(f"{meta}: itos: expected one character per id (a character-level meta.pkl)")
    if chars != sorted(chars) or len(set(chars)) != len(chars):
        fail(f"{meta}: itos: the characters are not in sorted order, as attograd's char unit numbers them")
    if len(chars) > vocab:
        fail(f"{meta}: itos: {len(chars)} characters, more than model_args.vocab_size {vocab}")
    return chars


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--meta", type=Path, help="nanoGPT's meta.pkl (default: meta.pkl beside ckpt, when there)")
    args = parser.parse_args()

    margs, sd = read_model(args.ckpt)
    tensors = gpt2_tensors(args.ckpt, margs, sd)
    meta = args.meta or args.ckpt.resolve().parent / "meta.pkl"
    chars = read_chars(meta, margs["vocab_size"]) if args.meta or meta.exists() else None
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": margs["vocab_size"],
              "n_positions": margs["block_size"], "n_embd": margs["n_embd"], "n_layer": margs["n_layer"],
              "n_head": margs["n_head"], "n_inner": None, "activation_function": "gelu",
              "layer_norm_epsilon": 1e-5, "scale_attn_weights": True, "tie_word_embeddings": True}
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomically(args.out / "config.json", [(json.dumps(config, indent=2) + "\n").encode()])
        write_atomically(args.out / "model.safetensors", safetensors_chunks(tensors))
        if chars is not None:
            repeats = math.ceil(12 * (margs["block_size"] + 1) / len(chars)) + 1
            write_atomically(args.out / "chars.txt", [("".join(chars) * repeats).encode("utf-8")])
    except OSError as e:
        fail(f"{args.out}: cannot write: {e}".splitlines()[0])
    print(f"wrote {args.out}; next: attograd import {args.out} --out RUN")


if __name__ == "__main__":
    main()
