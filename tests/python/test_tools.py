# Every study tool of the registry (study/tools.h) called from Python gives what `attograd TOOL --json`
# prints on the same run: one case per tool, and a test that no tool lacks one.
import os

import pytest

import attograd
from conftest import cli, cli_json

HERE = os.path.dirname(os.path.abspath(__file__))
SAE_CONFIG = os.path.join(HERE, "sae_tiny.json")
SAE_SYNTHETIC_CONFIG = os.path.join(HERE, "sae_synthetic_tiny.json")
CLEAN = "BOS 5 9 3 7 12 4 5 9 3 7 12"
CORRUPT = "BOS 5 9 3 7 12 4 5 9 3 20 12"

# name: (the Python call on an open Run (or None for a tool that reads no run), the program's arguments
# after the tool's name; "{run}" is the run folder).
CASES = {
    "eval": (lambda run: run.eval(n=16), ["{run}", "--n", "16"]),
    "patch": (lambda run: run.patch(CLEAN, CORRUPT, answer="4", wrong="20", attribution=True),
              ["{run}", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "4", "--wrong", "20",
               "--attribution"]),
    "lens": (lambda run: run.lens("BOS 5 9 3 7 12 5", answer="9"),
             ["{run}", "--tokens", "BOS 5 9 3 7 12 5", "--answer", "9"]),
    # Each front end writes its own folder beside the run (the session's run folder stays as trained).
    "sae": (lambda run: run.sae("blocks.0.resid_post", config=SAE_CONFIG,
                                out=os.path.join(run.path, "..", "sae-python")),
            ["{run}", "--at", "blocks.0.resid_post", "--config", SAE_CONFIG, "--out", "{run}/../sae-cli"]),
    "sae_synthetic": (lambda run: attograd.sae_synthetic(features=16, dim=8, p=0.1, sae_features=32,
                                                         seed=3, config=SAE_SYNTHETIC_CONFIG),
                      ["--features", "16", "--dim", "8", "--p", "0.1", "--sae-features", "32", "--seed", "3",
                       "--config", SAE_SYNTHETIC_CONFIG]),
    "tms": (lambda run: attograd.tms(n=5, m=2, sparsity=0.9, importance=0.8, steps=60, seed=2),
            ["--n", "5", "--m", "2", "--sparsity", "0.9", "--importance", "0.8", "--steps", "60", "--seed",
             "2"]),
}
# The program's words for a tool when they are not its name, and the keys that cannot agree (wall time).
COMMANDS = {"sae_synthetic": ["sae", "synthetic"]}
UNEQUAL = {"sae_synthetic": ["seconds"]}


def test_every_tool_has_a_case():
    assert sorted(t["name"] for t in attograd.tools()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_call_equals_the_command_lines_json(name, run, induction_dir):
    call, args = CASES[name]
    want = cli_json(*COMMANDS.get(name, [name]), *[a.replace("{run}", induction_dir) for a in args], "--json")
    got = call(run)
    for key in UNEQUAL.get(name, []):
        assert isinstance(got.pop(key), float) and isinstance(want.pop(key), float)
    assert got == want


def test_fields_by_position_and_name_and_token_ids(run, induction_dir):
    by_name = run.lens(input="BOS 5 9 3 7 12 5", answer="9")
    ids = run.tokens("BOS 5 9 3 7 12 5")
    (nine,) = run.tokens("9")
    assert run.lens(ids, int(nine)) == by_name
    assert run.lens(list(map(int, ids)), answer=nine) == by_name  # a numpy integer is an id too


def test_bad_requests_name_the_field_not_a_flag(run):
    with pytest.raises(ValueError, match=r"^answer: expected a token name or id, got 1\.5$"):
        run.lens("BOS 5 9", answer=1.5)
    with pytest.raises(ValueError, match=r"^answer: unknown token 'x'$"):
        run.lens("BOS 5 9", answer="x")
    with pytest.raises(ValueError, match=r"^clean has 4 tokens but corrupt has 3; patching needs inputs of"):
        run.patch("BOS 5 9 3", "BOS 5 9")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'tokens'"):
        run.lens(tokens="BOS 5 9")
    with pytest.raises(TypeError, match=r"multiple values for argument 'input'"):
        run.lens("BOS 5 9", input="BOS 5 9")
    with pytest.raises(ValueError, match=r"^save: expected a string, got 3$"):
        run.lens("BOS 5 9", save=3)
    # The command line says the same, without its flags' dashes.
    _, err = cli("lens", run.path, "--tokens", "BOS 5 9", "--answer", "x", expect=2)
    assert err.strip() == "attograd lens: answer: unknown token 'x'"
