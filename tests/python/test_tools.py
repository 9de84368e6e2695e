# Every study tool of the registry (study/tools.h) called from Python gives what `attograd TOOL --json`
# prints on the same run: one case per tool, and a test that no tool lacks one.
import pytest

import attograd
from conftest import cli, cli_json

CLEAN = "BOS 5 9 3 7 12 4 5 9 3 7 12"
CORRUPT = "BOS 5 9 3 7 12 4 5 9 3 20 12"

# name: (the Python call on an open Run, the program's arguments after the tool's command; "{run}" is the
# run folder, "{sweep}" and "{sweep_out}" a trained two-run sweep's file and out folder), and, when the
# command is not the tool's name, the command's words. A tool that reads no run ignores the Run.
CASES = {
    "eval": (lambda run: run.eval(n=16), ["{run}", "--n", "16"]),
    "patch": (lambda run: run.patch(CLEAN, CORRUPT, answer="4", wrong="20", attribution=True),
              ["{run}", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "4", "--wrong", "20",
               "--attribution"]),
    "lens": (lambda run: run.lens("BOS 5 9 3 7 12 5", answer="9"),
             ["{run}", "--tokens", "BOS 5 9 3 7 12 5", "--answer", "9"]),
    # Again over a finished sweep: every run is found finished and skipped, the summary rewritten.
    "sweep": (lambda run, sweep: attograd.sweep(sweep["file"], jobs=2), ["{sweep}", "-j", "2"]),
    "sweep_collect": (lambda run, sweep: attograd.sweep_collect(sweep["out"]), ["{sweep_out}"],
                      ["sweep", "collect"]),
}


def test_every_tool_has_a_case():
    assert sorted(t["name"] for t in attograd.tools()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_call_equals_the_command_lines_json(name, run, induction_dir, sweep_dir):
    call, args, *command = CASES[name]
    words = command[0] if command else [name]
    filled = [a.replace("{run}", induction_dir).replace("{sweep_out}", sweep_dir["out"])
              .replace("{sweep}", sweep_dir["file"]) for a in args]
    want = cli_json(*words, *filled, "--json")
    got = call(run, sweep_dir) if call.__code__.co_argcount == 2 else call(run)
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


def test_sweep_states_and_collect(sweep_dir, tmp_path):
    again = attograd.sweep(sweep_dir["file"])
    assert again["mode"] == "run" and again["total"] == 2 and again["finished_before"] == 2
    assert [(r["state"], r["outcome"]) for r in again["runs"]] == [("finished", "skipped")] * 2
    for r in again["runs"]:
        state = attograd.run_state(r["dir"])
        assert state["state"] == "finished" and state["step"] == state["steps"] == 20, state
    summary = attograd.sweep_collect(sweep_dir["out"])
    assert [r["status"] for r in summary["runs"]] == ["finished", "finished"]
    assert attograd.run_state(str(tmp_path / "none"))["state"] == "new"
    with pytest.raises(ValueError, match=r"^file: "):
        attograd.sweep("")
    with pytest.raises(ValueError, match=r"^jobs: "):
        attograd.sweep(sweep_dir["file"], jobs=-1)
