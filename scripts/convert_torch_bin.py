#!/usr/bin/env python3
"""Converts a Hugging Face model folder whose weights are a PyTorch pickle (pytorch_model.bin, or the shards
that pytorch_model.bin.index.json lists, as the TinyStories and older GPT-2, GPT-Neo and Pythia folders ship
them) into one `attograd import` reads: the same folder with model.safetensors (or its shards and
model.safetensors.index.json) in place of the pickles. No PyTorch needed.

Usage: scripts/convert_torch_bin.py SRC_DIR OUT_DIR
       attograd import OUT_DIR --out RUN

OUT_DIR gets every file of SRC_DIR but the pickles and other frameworks' weights (config.json, the
tokenizer's files, ...) and the safetensors, each tensor with its name, dtype and shape, its data in
row-major order. It is written beside OUT_DIR under a temporary name and renamed when complete, so a
failure leaves nothing; OUT_DIR must not exist.

The pickle is read with a restricted unpickler, never torch.load: it builds only dicts, lists, numbers,
strings and tensors (torch's _rebuild_tensor_v2 and _rebuild_parameter, its typed storages), and refuses
any other class the file names, so a checkpoint cannot run code. Only the zip format torch has saved since
1.6 is read, in little-endian byte order. Dtypes: float32, float16, bfloat16, float64, int64, int32, int16,
int8, uint8 and bool. Errors are one line naming the file and what was expected, exit 2.
"""
import argparse
import collections
import json
import math
import os
import pickle
import shutil
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

# torch's typed storage classes: safetensors dtype and bytes per element.
STORAGES = {"FloatStorage": ("F32", 4), "HalfStorage": ("F16", 2), "BFloat16Storage": ("BF16", 2),
            "DoubleStorage": ("F64", 8), "LongStorage": ("I64", 8), "IntStorage": ("I32", 4),
            "ShortStorage": ("I16", 2), "CharStorage": ("I8", 1), "ByteStorage": ("U8", 1),
            "BoolStorage": ("BOOL", 1)}
WEIGHT_FILES = (".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".ot")  # not copied to OUT_DIR
MAX_PICKLE_BYTES = 64 << 20  # a state dict's pickle holds names and shapes, not data


class Refused(Exception):
    pass


class StorageType:
    def __init__(self, name):
        self.dtype, self.itemsize = STORAGES[name]


class Storage:
    def __init__(self, storage_type, key, numel):
        self.dtype, self.itemsize, self.key, self.numel = storage_type.dtype, storage_type.itemsize, key, numel


class Tensor:
    def __init__(self, storage, offset, shape, stride):
        self.storage, self.offset, self.shape, self.stride = storage, offset, tuple(shape), tuple(stride)
        self.numel = math.prod(self.shape)


def rebuild_tensor_v2(storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
    if not isinstance(storage, Storage):
        raise Refused("a tensor whose storage is not a typed storage")
    ints = lambda v: isinstance(v, tuple) and all(isinstance(x, int) for x in v)  # noqa: E731
    if not (isinstance(offset, int) and ints(size) and ints(stride)):
        raise Refused(f"a tensor with offset {offset!r}, size {size!r}, stride {stride!r}; expected integers")
    if len(stride) != len(size) or offset < 0 or min(size + stride, default=0) < 0:
        raise Refused(f"a tensor of shape {list(size)} with strides {list(stride)} and offset {offset}; "
                      "expected a stride per dimension and nothing negative")
    return Tensor(storage, offset, size, stride)


def rebuild_parameter(data, requires_grad=False, hooks=None, state=None):
    return data


ALLOWED = {("collections", "OrderedDict"): collections.OrderedDict,
           ("torch._utils", "_rebuild_tensor_v2"): rebuild_tensor_v2,
           ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
           ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter}
ALLOWED.update({("torch", name): StorageType(name) for name in STORAGES})


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise Refused(f"the pickle names {module}.{name}; only tensors, dicts, lists, numbers and strings "
                          "are read")
        return ALLOWED[(module, name)]

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"
                and isinstance(pid[1], StorageType) and isinstance(pid[4], int)):
            raise Refused(f"a persistent id {str(pid)[:60]}, not a typed storage ('storage', type, key, "
                          "location, numel)")
        return Storage(pid[1], str(pid[2]), pid[4])


def read_checkpoint(path):
    """The pickle's object and a function giving a storage's bytes."""
    if not zipfile.is_zipfile(path):
        raise Refused("not a zip archive: only the format torch.save has written since PyTorch 1.6 is read "
                      "(load and save it again with a newer torch)")
    archive = zipfile.ZipFile(path)
    pickles = [n for n in archive.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise Refused(f"{len(pickles)} data.pkl records, expected 1")
    prefix = pickles[0][:-len("data.pkl")]
    order = prefix + "byteorder"
    if order in archive.namelist() and archive.read(order).strip() != b"little":
        raise Refused("saved in big-endian byte order")
    info = archive.getinfo(pickles[0])
    if info.file_size > MAX_PICKLE_BYTES:
        raise Refused(f"data.pkl of {info.file_size} bytes, more than {MAX_PICKLE_BYTES}")
    try:
        obj = Unpickler(archive.open(pickles[0])).load()
    except Refused:
        raise
    except Exception as e:  # a malformed pickle: any of the unpickler's own errors
        raise Refused(f"data.pkl is not a readable pickle ({type(e).__name__}: {e})") from None

    def storage_bytes(storage):
        name = f"{prefix}data/{storage.key}"
        try:
            size = archive.getinfo(name).file_size
        except KeyError:
            raise Refused(f"no record {name} for a storage") from None
        if size != storage.numel * storage.itemsize:
            raise Refused(f"record {name} holds {size} bytes, but its storage is {storage.numel} elements of "
                          f"{storage.itemsize}")
        return archive.read(name)

    return obj, storage_bytes


def state_dict(obj):
    """The name -> Tensor dict a checkpoint holds: the object itself, or its "state_dict" or "model" entry."""
    if isinstance(obj, dict) and obj and all(isinstance(v, Tensor) for v in obj.values()):
        return obj
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            return state_dict(obj[key])
    raise Refused("no state dict (a dict of names to tensors) in the checkpoint")


def tensor_bytes(t, data):
    """t's elements in row-major order, read from its storage's bytes through its offset and strides."""
    n, size = t.numel, t.storage.itemsize
    if n == 0:
        return b""
    last = t.offset + sum((d - 1) * s for d, s in zip(t.shape, t.stride))
    if last >= t.storage.numel:
        raise Refused(f"shape {list(t.shape)} with strides {list(t.stride)} past its storage of "
                      f"{t.storage.numel} elements")
    expected, step = [], 1
    for d in reversed(t.shape):
        expected.append(step)
        step *= d
    if all(d == 1 or s == e for d, s, e in zip(t.shape, t.stride, reversed(expected))):  # row-major
        return data[t.offset * size:(t.offset + n) * size]
    out = bytearray()  # a view with other strides (a transpose): gathered a row at a time
    rows = n // t.shape[-1]
    for r in range(rows):
        index, rest = t.offset, r
        for d, s in zip(reversed(t.shape[:-1]), reversed(t.stride[:-1])):
            index += (rest % d) * s
            rest //= d
        for j in range(t.shape[-1]):
            e = index + j * t.stride[-1]
            out += data[e * size:(e + 1) * size]
    return bytes(out)


def convert_file(src, dst):
    """Writes the tensors of the pickle src as safetensors dst, a tensor at a time. Returns the bytes of
    tensor data and the names."""
    obj, storage_bytes = read_checkpoint(src)
    tensors = state_dict(obj)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise Refused(f"a tensor name {name!r} that is not a string")
        header[name] = {"dtype": t.storage.dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + t.numel * t.storage.itemsize]}
        offset += t.numel * t.storage.itemsize
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    cache = {}  # the last storage read: a storage shared by several tensors (tied weights) is read once
    with open(dst, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for name, t in tensors.items():
            if t.storage.key not in cache:
                cache = {t.storage.key: storage_bytes(t.storage)}
            try:
                out.write(tensor_bytes(t, cache[t.storage.key]))
            except Refused as e:
                raise Refused(f"tensor {name}: {e}") from None
    return offset, list(tensors)


def convert(src_dir, out_dir):
    single, index = src_dir / "pytorch_model.bin", src_dir / "pytorch_model.bin.index.json"
    if not src_dir.is_dir():
        raise Refused(f"{src_dir}: not a folder")
    if out_dir.exists():
        raise Refused(f"{out_dir}: exists; give a new folder")
    if not single.is_file() and not index.is_file():
        raise Refused(f"{src_dir}: no pytorch_model.bin or pytorch_model.bin.index.json")
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        for f in sorted(src_dir.iterdir()):
            if f.is_file() and not f.name.endswith(WEIGHT_FILES) and f.name != index.name and \
                    not f.name.startswith(("model.safetensors", "model-")):
                shutil.copyfile(f, work / f.name)
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
                shards = sorted(set(weight_map.values()))
            except (ValueError, KeyError, TypeError, AttributeError):
                raise Refused(f"{index}: expected JSON with a weight_map of tensor names to files") from None
            new_map, total = {}, 0
            for shard in shards:
                if "/" in shard or not shard.endswith(".bin"):
                    raise Refused(f"{index}: shard {shard!r}, expected a .bin file in the folder")
                target = shard[:-len(".bin")].replace("pytorch_model", "model", 1) + ".safetensors"
                try:
                    size, names = convert_file(src_dir / shard, work / target)
                except Refused as e:
                    raise Refused(f"{src_dir / shard}: {e}") from None
                total += size
                new_map.update({n: target for n in names})
            missing = sorted(set(weight_map) - set(new_map))
            if missing:
                raise Refused(f"{index}: {missing[0]} is listed but in none of its shards")
            (work / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {"total_size": total}, "weight_map": new_map}, indent=2) + "\n")
        else:
            try:
                convert_file(single, work / "model.safetensors")
            except Refused as e:
                raise Refused(f"{single}: {e}") from None
        os.rename(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path, help="a Hugging Face model folder with pytorch_model.bin")
    parser.add_argument("out", type=Path, help="the folder to write (must not exist)")
    args = parser.parse_args()
    try:
        convert(args.src, args.out)
    except Refused as e:
        print(f"convert_torch_bin.py: {e}", file=sys.stderr)
        sys.exit(2)
    except (OSError, pickle.UnpicklingError, zipfile.BadZipFile, EOFError) as e:
        print(f"convert_torch_bin.py: {args.src}: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {args.out}; next: attograd import {args.out} --out RUN")


if __name__ == "__main__":
    main()
