# Every study tool of the registry (study/tools.h) called from Python gives what `attograd TOOL --json`
# prints on the same run: one case per tool, and a test that no tool lacks one.
import pytest

import attograd
from conftest import SOURCE_DIR, cli, cli_json

CLEAN = "BOS 5 9 3 7 12 4 5 9 3 7 12"
CORRUPT = "BOS 5 9 3 7 12 4 5 9 3 20 12"

# What a bench measures changes from run to run; what it measured on does not.
def bench_setting(result):
    return {k: result[k] for k in ("impl", "config", "mode", "threads", "shards", "params", "cpu",
                                   "vector_isa", "vector_bits", "peak_fma_gflops")} | {"keys": sorted(result)}


# name: (the call: on an open Run for a tool that reads one, else with no argument; the program's arguments
# after the tool's command (COMMANDS, else its name), "{run}" the run folder, "{src}" the source folder and
# "{sweep}" and "{sweep_out}" a trained two-run sweep's file and out folder (the call then gets the sweep);
# optionally what to compare of both results, when some of it is measured rather than computed).
CASES = {
    "demo": (lambda: attograd.demo(3), ["--section", "3"]),
    "bench": (lambda: attograd.bench("{src}/bench/configs/tiny.json".format(src=SOURCE_DIR), steps=2,
                                     warmup=0, threads=1, peak_gflops=100.0),
              ["{src}/bench/configs/tiny.json", "--steps", "2", "--warmup", "0", "--threads", "1",
               "--peak-gflops", "100"], bench_setting),
    "eval": (lambda run: run.eval(n=16), ["{run}", "--n", "16"]),
    "patch": (lambda run: run.patch(CLEAN, CORRUPT, answer="4", wrong="20", attribution=True),
              ["{run}", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "4", "--wrong", "20",
               "--attribution"]),
    "lens": (lambda run: run.lens("BOS 5 9 3 7 12 5", answer="9"),
             ["{run}", "--tokens", "BOS 5 9 3 7 12 5", "--answer", "9"]),
    # Again over a finished sweep: every run is found finished and skipped, the summary rewritten.
    "sweep": (lambda sweep: attograd.sweep(sweep["file"], jobs=2), ["{sweep}", "-j", "2"]),
    "sweep_collect": (lambda sweep: attograd.sweep_collect(sweep["out"]), ["{sweep_out}"]),
}
# The command of a tool whose name is not its command's.
COMMANDS = {"sweep_collect": ["sweep", "collect"]}


def test_every_tool_has_a_case():
    assert sorted(t["name"] for t in attograd.tools()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_call_equals_the_command_lines_json(name, request):
    call, args, *compared = CASES[name]
    tool = next(t for t in attograd.tools() if t["name"] == name)
    run = request.getfixturevalue("run") if tool["reads_run"] else None
    sweep = request.getfixturevalue("sweep_dir") if any("{sweep" in a for a in args) else None
    args = [a.replace("{run}", run.path if run else "").replace("{src}", SOURCE_DIR) for a in args]
    if sweep:
        args = [a.replace("{sweep_out}", sweep["out"]).replace("{sweep}", sweep["file"]) for a in args]
    want = cli_json(*COMMANDS.get(name, [name]), *args, "--json")
    got = call(run) if run else call(sweep) if sweep else call()
    if compared:
        got, want = compared[0](got), compared[0](want)
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


def test_a_deep_argument_is_one_line_not_a_crash(run):
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^argument: line 1, column \d+: nested deeper than 64 levels$"):
        run.lens(deep)
