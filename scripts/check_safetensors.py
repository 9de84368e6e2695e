#!/usr/bin/env python3
"""Checks a safetensors file independently of attograd's C++ reader, and shows PyTorch can load it.

Written from the format's specification (https://huggingface.co/docs/safetensors), because the `safetensors`
package is not installable here: an 8-byte little-endian u64 N, N bytes of JSON header
{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}}, then the data section,
which the tensors must tile exactly. It validates all of that, loads each tensor into torch, and prints
name, shape, dtype and checksums (the sum, and a CRC-32 of the raw bytes for bit-exact comparisons).

With --load-model it also builds a plain torch state_dict, checks the checkpoint names of
docs/architecture.md, and loads it strictly into tests/fixtures/reference_model.py's CausalLM, built from
the config in the file's metadata (every model option); with --forward-json it also runs that model's
forward and compares its logits with attograd's.

Usage: scripts/check_safetensors.py FILE [--load-model]
Exit codes: 0 valid, 1 invalid file or model names, 2 bad usage. Errors are one line: `FILE: what (field)`.
"""
import argparse
import collections
import json
import os
import re
import sys
import zlib

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from reference_model import CausalLM  # noqa: E402

MAX_HEADER_BYTES = 100_000_000  # the reference implementation's limit

# Dtypes of the specification that numpy can read (little-endian); BF16 is read as u16 and viewed by torch.
DTYPES = {
    "BOOL": ("|b1", 1), "U8": ("|u1", 1), "I8": ("|i1", 1), "I16": ("<i2", 2), "U16": ("<u2", 2),
    "I32": ("<i4", 4), "U32": ("<u4", 4), "I64": ("<i8", 8), "U64": ("<u8", 8),
    "F16": ("<f2", 2), "BF16": ("<u2", 2), "F32": ("<f4", 4), "F64": ("<f8", 8),
}


class Invalid(Exception):
    def __init__(self, what, field):
        super().__init__(f"{what} ({field})")


def one_line(text):
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: "\\x%02x" % ord(m.group()), text)


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def parse_header(raw, data_size):
    """Returns (metadata, entries sorted by offset) after checking the header against the data section."""
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Invalid(f"header is not valid JSON: {e}", "header")
    except RecursionError:
        raise Invalid("header JSON is nested too deeply", "header")
    if not isinstance(header, dict):
        raise Invalid("header must be a JSON object", "header")
    metadata, entries = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict):
                raise Invalid("__metadata__ must be an object of strings", "__metadata__")
            for k, v in info.items():
                if not isinstance(v, str):
                    raise Invalid("metadata value must be a string", f"__metadata__.{k}")
            metadata = info
            continue
        if not isinstance(info, dict):
            raise Invalid("tensor entry must be an object with dtype, shape, data_offsets", name)
        for key in ("dtype", "shape", "data_offsets"):
            if key not in info:
                raise Invalid(f'missing field "{key}"', name)
        extra = set(info) - {"dtype", "shape", "data_offsets"}
        if extra:
            raise Invalid(f'unexpected field "{sorted(extra)[0]}"', name)
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise Invalid(f"dtype {dtype} is not supported by this checker", f"{name}: dtype")
        if not isinstance(shape, list) or not all(is_uint(d) for d in shape):
            raise Invalid("shape must be an array of non-negative integers", f"{name}: shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_uint(o) for o in offsets)):
            raise Invalid("data_offsets must be [begin, end] of non-negative integers", f"{name}: data_offsets")
        begin, end = offsets
        if begin > end:
            raise Invalid(f"data_offsets begin {begin} is after end {end}", f"{name}: data_offsets")
        if end > data_size:
            raise Invalid(f"data_offsets end {end} is beyond the data section's {data_size} bytes",
                          f"{name}: data_offsets")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * DTYPES[dtype][1]:
            raise Invalid(f"data_offsets span {end - begin} bytes but shape {shape} of {dtype} needs "
                          f"{numel * DTYPES[dtype][1]}", f"{name}: data_offsets")
        entries.append((begin, end, name, dtype, shape))
    entries.sort()
    covered, previous = 0, None
    for begin, end, name, _, _ in entries:
        if begin < covered:
            raise Invalid(f'data_offsets overlap those of "{previous}"', f"{name}: data_offsets")
        if begin > covered:
            raise Invalid(f"data_offsets leave bytes [{covered}, {begin}) of the data section unused",
                          f"{name}: data_offsets")
        covered, previous = end, name
    if covered != data_size:
        raise Invalid(f"tensors cover {covered} bytes but the data section has {data_size}", "data section")
    return metadata, entries


def load(path):
    """Returns (metadata, [(name, dtype, tensor, raw bytes)] in file order, sizes)."""
    if not os.path.exists(path):
        raise Invalid("no such file", "file")
    if os.path.isdir(path):
        raise Invalid("is a directory, expected a safetensors file", "file")
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        if file_size < 8:
            raise Invalid(f"file is {file_size} bytes, too short for the 8-byte header size", "header size")
        n = int.from_bytes(f.read(8), "little")
        if n > file_size - 8:
            raise Invalid(f"header size {n} is beyond the file's remaining {file_size - 8} bytes", "header size")
        if n > MAX_HEADER_BYTES:
            raise Invalid(f"header size {n} is over the limit of {MAX_HEADER_BYTES} bytes", "header size")
        raw_header = f.read(n)
        data_size = file_size - 8 - n
        metadata, entries = parse_header(raw_header, data_size)
        data = f.read()
    if len(data) != data_size:
        raise Invalid("file changed while being read", "file")
    tensors = []
    for begin, end, name, dtype, shape in entries:
        raw = data[begin:end]
        np_dtype, size = DTYPES[dtype]
        arr = np.frombuffer(raw, dtype=np_dtype, count=(end - begin) // size).reshape(shape)
        t = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("=")))  # a native-order, writable copy
        if dtype == "BF16":
            t = t.view(torch.int16).view(torch.bfloat16)
        tensors.append((name, dtype, t, raw))
    return metadata, tensors, (file_size, n, data_size)


def check_model(state_dict, metadata, forward_json=None):
    """Checks the checkpoint names against those of tests/fixtures/reference_model.py's CausalLM built from
    the metadata's config (or, without one, from the names themselves) and loads the state_dict into it
    strictly; with forward_json (the output of `attograd forward RUN --json`), also runs its forward on the
    same ids and compares the logits. Returns a list of problems (empty if fine)."""
    if "tok_emb.weight" not in state_dict:
        return ["missing tensor (tok_emb.weight)"]
    vocab, d_model = state_dict["tok_emb.weight"].shape
    # Rotary or no positions (model.positions) have no pos_emb: max_len is then the config's.
    max_len = state_dict["pos_emb.weight"].shape[0] if "pos_emb.weight" in state_dict else None
    layers = {int(m.group(1)) for k in state_dict for m in [re.match(r"blocks\.(\d+)\.", k)] if m}
    d_ff = state_dict["blocks.0.mlp.fc1.weight"].shape[0] if "blocks.0.mlp.fc1.weight" in state_dict else None
    # Without a config, the names say what they can; the activation and the head count cannot be seen (a
    # gate says the MLP is gated, read as SwiGLU: GEGLU has the same names).
    model = {"n_layers": max(layers) + 1 if layers else 0, "n_heads": 1,
             "activation": "swiglu" if any(k.endswith(".mlp.gate.weight") for k in state_dict) else "gelu",
             "tie_embeddings": "lm_head.weight" not in state_dict,
             "attention_only": not any(k.endswith(".mlp.fc1.weight") for k in state_dict),
             "norm": ("layer" if "ln_f.bias" in state_dict else "rms") if "ln_f.weight" in state_dict else "none",
             "bias": "lm_head.bias" in state_dict}
    if "config" in metadata:  # the resolved config says what the model should be
        try:
            model = json.loads(metadata["config"]).get("model", {})
        except (json.JSONDecodeError, AttributeError) as e:
            return [f"metadata config is not a JSON object: {e} (__metadata__.config)"]
    # The sizes come from the tensors, so a mismatch shows as a missing or unexpected name, not here.
    model = {**model, "d_model": int(d_model), "vocab": int(vocab)}
    if max_len is not None:
        model["max_len"] = int(max_len)
    elif not model.get("max_len"):
        return ["missing tensor (pos_emb.weight), and no model.max_len in __metadata__.config"]
    max_len = model["max_len"]
    if d_ff is not None:
        model["d_ff"] = int(d_ff)
    try:
        module = CausalLM(model)
    except ValueError as e:
        return [f"{e} (__metadata__.config)"]
    o = module.options
    print(f"model: vocab={vocab} max_len={max_len} d_model={d_model} d_ff={o['d_ff']} n_layers={o['n_layers']} "
          f"n_heads={o['n_heads']} attention_only={o['attention_only']} norm={o['norm']} "
          f"activation={o['activation']} bias={o['bias']} parallel={o['parallel']} "
          f"tie_embeddings={o['tie_embeddings']} logit_softcap={o['logit_softcap']} "
          f"n_kv_heads={o['n_kv_heads']} attn_window={o['attn_window']}")
    expected = list(module.state_dict())
    problems = [f"missing tensor ({n})" for n in expected if n not in state_dict]
    problems += [f"unexpected tensor ({n})" for n in state_dict if n not in set(expected)]
    if problems:
        return problems
    try:
        module.load_state_dict(state_dict, strict=True)
    except RuntimeError as e:
        return ["torch load_state_dict(strict=True) failed: " + " ".join(str(e).split())]
    print(f"model: all {len(expected)} checkpoint names present; torch load_state_dict(strict=True) succeeded")
    if forward_json is not None:
        with open(forward_json) as f:
            ours = json.load(f)
        with torch.no_grad():
            theirs = module(torch.tensor([ours["ids"]]))[0]
        diff = (theirs - torch.tensor(ours["logits"])).abs().max().item()
        scale = theirs.abs().max().item()
        print(f"forward: {len(ours['ids'])} tokens, torch vs attograd logits max |diff| {diff:.3e} "
              f"(max |logit| {scale:.3e})")
        if diff > 1e-4 * scale + 1e-5:
            return [f"torch forward differs from attograd's by {diff:.3e} ({forward_json})"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--load-model", action="store_true",
                        help="check the checkpoint names and load them into a torch module")
    parser.add_argument("--forward-json", metavar="FILE",
                        help="with --load-model: the output of `attograd forward RUN --json`; run torch's "
                             "forward on the same ids and compare the logits")
    args = parser.parse_args()
    try:
        metadata, tensors, (file_size, n, data_size) = load(args.file)
    except Invalid as e:
        print(one_line(f"{args.file}: {e}"), file=sys.stderr)
        return 1
    print(f"file: {args.file} ({file_size} bytes: 8 + header {n} + data {data_size}; "
          f"data aligned to 8: {(8 + n) % 8 == 0})")
    for k, v in metadata.items():
        shown = v if len(v) <= 80 else v[:77] + "..."
        print(f"metadata: {k} = {one_line(shown)}")
    for name, dtype, t, raw in tensors:
        total = t.double().sum().item() if t.numel() else 0.0
        print(f"tensor: {one_line(name)} shape={list(t.shape)} dtype={dtype} torch={t.dtype} "
              f"sum={total:.9g} crc32={zlib.crc32(raw):08x}")
    print(f"OK: {len(tensors)} tensors, {sum(t.numel() for _, _, t, _ in tensors)} values")
    if args.load_model:
        state_dict = collections.OrderedDict((name, t) for name, _, t, _ in tensors)
        problems = check_model(state_dict, metadata, args.forward_json)
        for p in problems:
            print(one_line(f"{args.file}: {p}"), file=sys.stderr)
        if problems:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
