# The study tools on an imported model (issue 42's "patch, lens, circuits, detect and sae run on an imported
# GPT-2-layout model, and their Python twins give the same numbers"): tests/fixtures/import/gpt2 imported as
# it is and with TransformerLens's processing (import --process), each tool run by `attograd TOOL --json` and
# by the Run method of the same name on the same folder, the two results equal.
import json
import os
import shutil
import struct

import numpy as np
import pytest

import attograd
from conftest import SOURCE_DIR, cli, cli_json

HERE = os.path.dirname(os.path.abspath(__file__))
SAE_CONFIG = os.path.join(HERE, "sae_tiny.json")
GPT2 = f"{SOURCE_DIR}/tests/fixtures/import/gpt2"
# The fixture has no tokenizer: its task is random tokens over the model's 50 ids, named by their numbers.
CLEAN = "3 17 5 42 0 9 31 17 5 42"
CORRUPT = "3 17 5 42 0 9 31 17 8 42"

# name: (the Run method's call, the program's arguments after "{run}"). sae writes beside the run, each front
# end its own folder.
TOOLS = {
    "patch": (lambda run: run.patch(CLEAN, CORRUPT, answer="0", wrong="9", attribution=True),
              ["--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "0", "--wrong", "9", "--attribution"]),
    "lens": (lambda run: run.lens(CLEAN, answer="0"), ["--tokens", CLEAN, "--answer", "0"]),
    "circuits": (lambda run: run.circuits(processed=True), ["--processed"]),
    "detect": (lambda run: run.detect(pattern="induction", mode="abs", n=16),
               ["--pattern", "induction", "--mode", "abs", "--n", "16"]),
    "sae": (lambda run: run.sae("blocks.1.resid_post", config=SAE_CONFIG,
                                out=os.path.join(run.path, "..", "sae-python")),
            ["--at", "blocks.1.resid_post", "--config", SAE_CONFIG, "--out", "{run}/../sae-cli"]),
}


@pytest.fixture(scope="module", params=["as_stored", "processed"])
def imported(request, tmp_path_factory):
    """The GPT-2 fixture imported by Python into a folder of its own; "processed" with process=True."""
    root = tmp_path_factory.mktemp(request.param)
    out = str(root / "run")
    result = attograd.import_model(GPT2, out=out, process=request.param == "processed")
    assert result["family"] == "gpt2" and result["processed"] == (request.param == "processed")
    return out


def close(got, want, path="result"):
    """Equal structure, strings and integers exactly, floats within 1e-6 (relative above 1)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), path
        for k in want:
            close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            close(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), f"{path}: {got} != {want}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_tool_on_an_imported_run_is_the_same_from_python_and_the_command_line(imported, tool):
    call, args = TOOLS[tool]
    want = cli_json(tool, imported, *[a.replace("{run}", imported) for a in args], "--json")
    with attograd.load_run(imported) as run:
        got = call(run)
    close(got, want)


def test_the_processed_import_is_the_command_lines(imported, tmp_path):
    marker = json.load(open(os.path.join(imported, "imported.json")))
    flags = ["--process"] if marker["processed"] else []
    printed = cli_json("import", GPT2, "--out", str(tmp_path / "cli"), *flags, "--json")
    assert {k: v for k, v in printed.items() if k != "run"} == {k: v for k, v in marker.items() if k != "run"}
    if marker["processed"]:
        assert sorted(marker["processing"]) == ["center_unembed", "center_writing_weights", "fold_ln",
                                                "fold_value_biases"]


def test_processing_keeps_the_log_probabilities(tmp_path):
    ids = np.array(json.load(open(f"{GPT2}/expected.json"))["ids"])
    logits = {}
    for process in (False, True):
        out = str(tmp_path / f"run-{process}")
        attograd.import_model(GPT2, out=out, process=process)
        with attograd.load_run(out) as run:
            logits[process] = np.asarray(run.forward(ids), dtype=np.float64).reshape(len(ids), -1)

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    assert np.abs(log_softmax(logits[True]) - log_softmax(logits[False])).max() < 1e-4
    assert np.abs(logits[True].mean(-1)).max() < 1e-5  # center_unembed
    assert np.abs(logits[False].mean(-1)).max() > 1e-3


# A GPT-2-layout folder with a byte-level BPE tokenizer (tests/fixtures/tokenizer/tokenizer.json, 657 tokens):
# random weights in GPT-2's names and Conv1D (in, out) layout, written here with numpy (the tools' results
# are compared between the front ends, not with a reference). Its task is "pretrained": prompts are text, and
# token names are the tokenizer's ("\\s" a space). circuits and sae need a task with data (a pretrained task
# has none): both run on the fixture above.
def write_gpt2_with_tokenizer(folder, vocab=657, d=16, layers=2, positions=32):
    rng = np.random.default_rng(7)
    r = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)
    tensors = {"wte.weight": r(vocab, d), "wpe.weight": r(positions, d),
               "ln_f.weight": 1 + r(d), "ln_f.bias": r(d)}
    for l in range(layers):
        h = f"h.{l}."
        tensors.update({h + "ln_1.weight": 1 + r(d), h + "ln_1.bias": r(d),
                        h + "attn.c_attn.weight": r(d, 3 * d), h + "attn.c_attn.bias": r(3 * d),
                        h + "attn.c_proj.weight": r(d, d), h + "attn.c_proj.bias": r(d),
                        h + "ln_2.weight": 1 + r(d), h + "ln_2.bias": r(d),
                        h + "mlp.c_fc.weight": r(d, 4 * d), h + "mlp.c_fc.bias": r(4 * d),
                        h + "mlp.c_proj.weight": r(4 * d, d), h + "mlp.c_proj.bias": r(d)})
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    os.makedirs(folder)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = {"model_type": "gpt2", "vocab_size": vocab, "n_positions": positions, "n_embd": d,
              "n_layer": layers, "n_head": 4, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    shutil.copy(f"{SOURCE_DIR}/tests/fixtures/tokenizer/tokenizer.json", folder)


CLEAN_TEXT = "The cat sat on the mat. The cat"
CORRUPT_TEXT = "The dog sat on the mat. The cat"
PROMPT_TOOLS = {
    "patch": (lambda run: run.patch(prompt=CLEAN_TEXT, corrupt={"prompt": CORRUPT_TEXT}, answer="\\sthe",
                                    wrong=".", attribution=True),
              ["--clean-prompt", CLEAN_TEXT, "--corrupt-prompt", CORRUPT_TEXT, "--answer", "\\sthe",
               "--wrong", ".", "--attribution"]),
    "lens": (lambda run: run.lens(prompt=CLEAN_TEXT), ["--prompt", CLEAN_TEXT]),
    "detect": (lambda run: run.detect(pattern="previous", prompt=CLEAN_TEXT), ["--pattern", "previous",
                                                                                "--prompt", CLEAN_TEXT]),
}


@pytest.fixture(scope="module")
def bpe_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bpe")
    write_gpt2_with_tokenizer(str(root / "src"))
    out = str(root / "run")
    attograd.import_model(str(root / "src"), out=out)
    return out


@pytest.mark.parametrize("tool", sorted(PROMPT_TOOLS))
def test_a_prompt_on_an_imported_bpe_model_is_the_same_from_python_and_the_command_line(bpe_run, tool):
    call, args = PROMPT_TOOLS[tool]
    want = cli_json(tool, bpe_run, *args, "--json")
    with attograd.load_run(bpe_run) as run:
        close(call(run), want)


def test_a_text_gives_an_imported_bpe_model_data_in_python_as_on_the_command_line(tmp_path):
    """import_model(..., text=FILE): the run's task reads FILE, so eval runs, the same from both front ends."""
    write_gpt2_with_tokenizer(str(tmp_path / "src"))
    with open(f"{SOURCE_DIR}/configs/text.json") as f:
        text = json.load(f)["task"]["path"]
    out = str(tmp_path / "run")
    attograd.import_model(str(tmp_path / "src"), out=out, text=text)
    with open(os.path.join(out, "config.json")) as f:
        task = json.load(f)["task"]
    assert (task["kind"], task["unit"], task["path"]) == ("text", "bpe", text)
    with attograd.load_run(out) as run:
        got = run.eval()
    close(got, cli_json("eval", out, "--json"))
    with pytest.raises(ValueError, match="text: .*not a file"):
        attograd.import_model(str(tmp_path / "src"), out=str(tmp_path / "missing"), text="/nonexistent.txt")
