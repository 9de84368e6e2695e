# scripts/import_nanogpt.py: a nanoGPT checkpoint (tests/fixtures/import/nanogpt_ckpt, saved by torch.save
# with an optimizer state, iter_num, best_val_loss and config, and a character meta.pkl) becomes a GPT-2
# folder without PyTorch: the same bytes the fixture nanogpt holds (written by make_import_fixtures.py
# through this script), which imports to the reference logits of an independent nanoGPT forward. Hostile
# or malformed checkpoints and meta.pkl files exit 2 with one line and write nothing.
import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np

import attograd
from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "scripts", "import_nanogpt.py")
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures", "import")
CKPT = os.path.join(FIXTURES, "nanogpt_ckpt", "ckpt.pt")
# Runs the script with `import torch` failing, so a test passes only if the script never needs it.
WITHOUT_TORCH = "import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; " \
                "runpy.run_path(sys.argv[0], run_name='__main__')"


def run(*args, expect=0):
    p = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, SCRIPT, *map(str, args)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == expect, p.stderr
    return p.stderr


def test_the_checkpoint_becomes_the_fixture_folder_and_imports_to_its_logits(tmp_path):
    out = tmp_path / "hf"
    run(CKPT, out)
    for name in ("config.json", "model.safetensors", "chars.txt"):
        assert (out / name).read_bytes() == open(os.path.join(FIXTURES, "nanogpt", name), "rb").read(), name
    run_dir = str(tmp_path / "run")
    attograd.import_model(str(out), out=run_dir)
    expected = json.load(open(os.path.join(FIXTURES, "nanogpt", "expected.json")))
    logits = attograd.load_run(run_dir).forward(expected["ids"])
    np.testing.assert_allclose(logits.reshape(-1, logits.shape[-1]), np.array(expected["logits"]).reshape(
        -1, logits.shape[-1]), atol=1e-4)


class Shell:  # pickles as a reference to os.system: what a hostile pickle runs under pickle.load
    def __reduce__(self):
        return (os.system, ("echo owned",))


def checkpoint(path, obj):
    """A zip archive as torch.save writes one, its data.pkl the pickle of obj (no tensors)."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
    return path


def test_hostile_and_malformed_inputs_exit_2_with_one_line_and_write_nothing(tmp_path):
    args = {"n_layer": 1, "n_head": 1, "n_embd": 4, "block_size": 8, "vocab_size": 5}
    legacy = tmp_path / "legacy.pt"
    legacy.write_bytes(pickle.dumps({"model_args": args, "model": {}}, protocol=2))
    meta_dir = tmp_path / "meta"
    meta_dir.mkdir()
    (meta_dir / "hostile.pkl").write_bytes(pickle.dumps({"itos": Shell()}, protocol=2))
    (meta_dir / "unsorted.pkl").write_bytes(pickle.dumps({"itos": {0: "b", 1: "a"}}, protocol=2))
    (meta_dir / "words.pkl").write_bytes(pickle.dumps({"itos": {0: "ab", 1: "c"}}, protocol=2))
    cases = {
        "code": ([checkpoint(tmp_path / "code.pt", {"model_args": Shell()})],
                 "only tensors, dicts, lists, numbers and strings are read"),
        "legacy": ([legacy], "not a zip archive"),
        "missing": ([tmp_path / "none.pt"], "none.pt: no such file"),
        "not_nanogpt": ([checkpoint(tmp_path / "sd.pt", {"model": {}})], "a dict with model_args and model"),
        "bad_args": ([checkpoint(tmp_path / "args.pt", {"model_args": {**args, "n_embd": 0}, "model": {}})],
                     "model_args.n_embd: expected a positive integer"),
        "no_tensor": ([checkpoint(tmp_path / "empty.pt", {"model_args": args, "model": {}})],
                      "model.transformer.wte.weight: missing tensor"),
        "hostile_meta": ([CKPT, "--meta", meta_dir / "hostile.pkl"], "only tensors, dicts"),
        "unsorted_meta": ([CKPT, "--meta", meta_dir / "unsorted.pkl"], "not in sorted order"),
        "word_meta": ([CKPT, "--meta", meta_dir / "words.pkl"], "one character per id"),
    }
    for case, (inputs, message) in cases.items():
        out = tmp_path / f"out-{case}"
        err = run(inputs[0], out, *inputs[1:], expect=2)
        assert message in err and err.count("\n") == 1 and err.startswith("import_nanogpt.py: "), f"{case}: {err}"
        assert not out.exists(), case
