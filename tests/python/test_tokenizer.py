# A text run on a byte-level BPE tokenizer (task.unit "bpe"): to_tokens and to_str_tokens encode text with
# the run's tokenizer, the tools take prompt=, and both agree with the program's --prompt.
import json
import os

import numpy as np
import pytest

import attograd
from conftest import SOURCE_DIR, cli_json

TOKENIZER = os.path.join(SOURCE_DIR, "tests", "fixtures", "tokenizer", "tokenizer.json")
PROMPT = "It's a caf\u00e9 \U0001F355 test"


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("bpe")
    text = root / "text.txt"
    with open("/usr/share/games/fortunes/cookie", encoding="utf-8", errors="replace") as f:
        text.write_text(f.read()[:20000] + PROMPT * 5, encoding="utf-8")
    config = {"name": "bpe", "task": {"kind": "text", "path": str(text), "unit": "bpe", "tokenizer": TOKENIZER,
                                      "length": 16},
              "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
              "train": {"steps": 5, "batch_size": 4, "eval_every": 5, "log_every": 5, "eval_size": 8,
                        "threads": 1},
              "output": {"attention_every": 0, "checkpoint_every": 0}}
    path = root / "bpe.json"
    path.write_text(json.dumps(config))
    out = str(root / "run")
    attograd.train(str(path), out=out)
    return out


def test_to_tokens_encodes_with_the_runs_tokenizer(bpe_dir):
    run = attograd.load_run(bpe_dir)
    ids = run.to_tokens(PROMPT)
    forward = cli_json("forward", bpe_dir, "--prompt", PROMPT, "--json")
    assert ids.shape == (1, len(forward["ids"]))
    assert ids[0].tolist() == forward["ids"]  # the tokenizer names no BOS: nothing put in front
    # Python shows tokens as text (" test"), the program by name ("\\stest").
    assert any(t.startswith("\\s") for t in forward["tokens"])
    assert [run.vocab[i] for i in ids[0]] == forward["tokens"]
    assert run.to_str_tokens(PROMPT) == [run.to_string([i]) for i in ids[0]]
    assert " test" in run.to_str_tokens(PROMPT) or "\\stest" not in forward["tokens"]
    assert run.to_string(ids[0]) == PROMPT
    assert run.to_str_tokens(ids[0]) == run.to_str_tokens(PROMPT)
    run.close()


def test_tools_take_prompt(bpe_dir):
    run = attograd.load_run(bpe_dir)
    report = run.forward_report(prompt=PROMPT)
    assert report["ids"] == run.to_tokens(PROMPT)[0].tolist()
    same = run.forward_report({"prompt": PROMPT})
    assert same["ids"] == report["ids"]
    lens = run.lens(prompt=PROMPT)
    assert lens["positions"] == [run.vocab[i] for i in report["ids"]]
    with pytest.raises(TypeError, match="both prompt and input"):
        run.lens(input="x", prompt=PROMPT)
    with pytest.raises(TypeError, match="prompt"):
        run.lens(prompt=3)
    run.close()
