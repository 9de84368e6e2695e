# scripts/convert_torch_bin.py: a Hugging Face folder with pytorch_model.bin (pickles as torch.save writes
# them, tests/fixtures/import/torch_bin*, made by make_import_fixtures.py from the gpt_neo and gpt2_bf16
# fixtures) becomes one `attograd import` reads, without PyTorch: its tensors are the source fixture's, byte
# for byte (a transposed view gathered, a tied weight kept, BF16 as stored), and the imported model's logits
# are that fixture's reference logits. Hostile or unreadable pickles exit 2 with one line and write nothing.
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import attograd
from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "scripts", "convert_torch_bin.py")
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "import")


def convert(src, out, expect=0):
    p = subprocess.run([sys.executable, SCRIPT, str(src), str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == expect, p.stderr
    return p.stderr


def tensors(folder):
    """name -> (dtype, shape, bytes) over a folder's safetensors files."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".safetensors"):
            continue
        raw = open(os.path.join(folder, f), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        for name, h in json.loads(raw[8:8 + n]).items():
            if name != "__metadata__":
                b, e = h["data_offsets"]
                out[name] = (h["dtype"], h["shape"], raw[8 + n + b:8 + n + e])
    return out


@pytest.mark.parametrize("pickled,source", [("torch_bin", "gpt_neo"), ("torch_bin_sharded", "gpt2_bf16")])
def test_the_converted_folder_holds_the_source_tensors_and_imports_to_its_logits(tmp_path, pickled, source):
    out = tmp_path / "converted"
    convert(os.path.join(FIXTURES, pickled), out)
    got, want = tensors(out), tensors(os.path.join(FIXTURES, source))
    # The pickle of gpt_neo also holds lm_head.weight, which shares wte's storage: kept, with wte's data.
    extra = set(got) - set(want)
    assert extra == ({"lm_head.weight"} if pickled == "torch_bin" else set())
    for name in want:
        assert got[name] == want[name], name
    if extra:
        assert got["lm_head.weight"][2] == want["transformer.wte.weight"][2]
    if pickled == "torch_bin_sharded":
        index = json.loads((out / "model.safetensors.index.json").read_text())
        assert sorted(set(index["weight_map"].values())) == ["model-00001-of-00002.safetensors",
                                                              "model-00002-of-00002.safetensors"]
    assert json.loads((out / "config.json").read_text()) == json.loads(
        open(os.path.join(FIXTURES, source, "config.json")).read())

    run_dir = str(tmp_path / "run")
    assert attograd.import_model(str(out), out=run_dir)["family"] == json.loads(
        (out / "config.json").read_text())["model_type"]
    expected = json.load(open(os.path.join(FIXTURES, source, "expected.json")))
    logits = attograd.load_run(run_dir).forward(expected["ids"])
    np.testing.assert_allclose(logits.reshape(-1, logits.shape[-1]), np.array(expected["logits"]).reshape(
        -1, logits.shape[-1]), atol=1e-4)


def zip_with_pickle(path, payload, records=None):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        for name, data in (records or {}).items():
            z.writestr(name, data)


class Shell:  # pickles as a reference to os.system: what a hostile checkpoint runs under torch.load
    def __reduce__(self):
        return (os.system, ("echo owned",))


def hostile_folders(tmp_path):
    cases = {}
    f = tmp_path / "code"
    f.mkdir()
    zip_with_pickle(f / "pytorch_model.bin", pickle.dumps({"w": Shell()}, protocol=2))
    cases["code"] = (f, "only tensors, dicts, lists, numbers and strings are read")
    f = tmp_path / "legacy"
    f.mkdir()
    (f / "pytorch_model.bin").write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=2))
    cases["legacy"] = (f, "not a zip archive")
    f = tmp_path / "truncated"
    f.mkdir()
    zip_with_pickle(f / "pytorch_model.bin", pickle.dumps({"w": 1}, protocol=2)[:-3])
    cases["truncated"] = (f, "not a readable pickle")
    f = tmp_path / "short_record"  # a storage of 4 floats whose record holds 3
    f.mkdir()
    source = open(os.path.join(FIXTURES, "torch_bin", "pytorch_model.bin"), "rb").read()
    with zipfile.ZipFile(io.BytesIO(source)) as z:
        records = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in records if "/data/" in n)
    records[name] = records[name][:-4]
    with zipfile.ZipFile(f / "pytorch_model.bin", "w") as z:
        for n, data in records.items():
            z.writestr(n, data)
    cases["short_record"] = (f, "bytes, but its storage is")
    f = tmp_path / "empty"
    f.mkdir()
    cases["empty"] = (f, "no pytorch_model.bin or pytorch_model.bin.index.json")
    return cases


def test_hostile_and_unreadable_pickles_exit_2_with_one_line_and_write_nothing(tmp_path):
    for case, (folder, message) in hostile_folders(tmp_path).items():
        out = tmp_path / f"out-{case}"
        err = convert(folder, out, expect=2)
        assert message in err and err.count("\n") == 1, f"{case}: {err}"
        assert not out.exists(), case
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out-")] == [], case
    out = tmp_path / "exists"
    out.mkdir()
    assert "exists" in convert(os.path.join(FIXTURES, "torch_bin"), out, expect=2)
    assert list(out.iterdir()) == []
