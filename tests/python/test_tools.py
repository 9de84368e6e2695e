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
# after the tool's name, "{run}" the run folder and "{src}" the source folder; optionally what to compare of
# both results, when some of it is measured rather than computed).
CASES = {
    "demo": (lambda: attograd.demo(3), ["--section", "3"]),
    "bench": (lambda: attograd.bench("{src}/bench/configs/tiny.json".format(src=SOURCE_DIR), steps=2,
                                     warmup=0, threads=1, peak_gflops=100.0),
              ["{src}/bench/configs/tiny.json", "--steps", "2", "--warmup", "0", "--threads", "1",
               "--peak-gflops", "100"], bench_setting),
    "forward": (lambda run: run.forward_report("BOS 5 9 3 7 12 5"), ["{run}", "--tokens", "BOS 5 9 3 7 12 5"]),
    "generate": (lambda run: run.generate("5 9 3 7 12 5", max_new=6, temperature=0.8, top_k=5, seed=3),
                 ["{run}", "--tokens", "5", "9", "3", "7", "12", "5", "--max-new", "6", "--temperature", "0.8",
                  "--top-k", "5", "--seed", "3"]),
    "attend": (lambda run: run.attend("5 9 3 7 12 5", layer=1),
               ["{run}", "--tokens", "5 9 3 7 12 5", "--layer", "1"]),
    "compare": (lambda run: run.compare(CLEAN, CORRUPT, head=0),
                ["{run}", "--a", CLEAN, "--b", CORRUPT, "--head", "0"]),
    "detect": (lambda run: run.detect(pattern="induction", mode="abs", n=16),
               ["{run}", "--pattern", "induction", "--mode", "abs", "--n", "16"]),
    "eval": (lambda run: run.eval(n=16), ["{run}", "--n", "16"]),
    "patch": (lambda run: run.patch(CLEAN, CORRUPT, answer="4", wrong="20", attribution=True),
              ["{run}", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "4", "--wrong", "20",
               "--attribution"]),
    "lens": (lambda run: run.lens("BOS 5 9 3 7 12 5", answer="9"),
             ["{run}", "--tokens", "BOS 5 9 3 7 12 5", "--answer", "9"]),
}


def test_every_tool_has_a_case():
    assert sorted(t["name"] for t in attograd.tools()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_call_equals_the_command_lines_json(name, request):
    call, args, *compared = CASES[name]
    tool = next(t for t in attograd.tools() if t["name"] == name)
    run = request.getfixturevalue("run") if tool["reads_run"] else None
    args = [a.replace("{run}", run.path if run else "").replace("{src}", SOURCE_DIR) for a in args]
    want = cli_json(name, *args, "--json")
    got = call(run) if run else call()
    if compared:
        got, want = compared[0](got), compared[0](want)
    assert got == want


def test_python_names_keep_the_modules_own_methods(run):
    names = {t["name"]: t["python_name"] for t in attograd.tools()}
    assert names["forward"] == "forward_report" and names["lens"] == "lens"
    ids = run.tokens("BOS 5 9 3 7 12 5")
    report = run.forward_report(ids)
    logits = run.forward(ids.reshape(1, -1))  # Run.forward is still the model's logits
    assert logits.shape == (1, len(ids), len(report["logits"][0]))
    assert abs(float(logits[0, -1].max()) - max(report["logits"][-1])) < 1e-4
    assert report["predictions"][-1] == int(logits[0, -1].argmax())


def test_generate_is_the_same_for_the_same_seed_and_greedy_ignores_it(run):
    a = run.generate("BOS 5 9 3 7 12 5", max_new=8, seed=11)
    assert a == run.generate("BOS 5 9 3 7 12 5", max_new=8, seed=11)
    assert len(a["generated"]) == 8 and a["stopped"] == "max_new"
    assert run.generate("5 9 3", max_new=5, temperature=0, seed=1) == run.generate("5 9 3", max_new=5,
                                                                                   temperature=0, seed=2)


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
    with pytest.raises(ValueError, match=r"^layer 7: the model has 2 layers \(valid: 0\.\.1\)$"):
        run.attend("BOS 5 9", layer=7)
    with pytest.raises(ValueError, match=r"^layer: expected an integer, got string \"x\"$"):
        run.attend("BOS 5 9", layer="x")
    with pytest.raises(ValueError, match=r"^a has 3 tokens but b has 2"):
        run.compare("BOS 5 9", "BOS 5")
    with pytest.raises(ValueError, match=r"^temperature -1: must be a finite number >= 0"):
        run.generate("BOS 5", temperature=-1)
    with pytest.raises(ValueError, match=r"^prompt: give prompt or tokens, not both$"):
        run.generate("BOS 5", prompt="5")
    with pytest.raises(ValueError, match=r"^pattern sideways: expected previous, duplicate"):
        run.detect(pattern="sideways")
    with pytest.raises(ValueError, match=r"^mode: expected"):
        run.detect(pattern="first", mode="max")
    # The command line says the same, without its flags' dashes.
    _, err = cli("lens", run.path, "--tokens", "BOS 5 9", "--answer", "x", expect=2)
    assert err.strip() == "attograd lens: answer: unknown token 'x'"


def test_a_deep_argument_is_one_line_not_a_crash(run):
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^argument: line 1, column \d+: nested deeper than 64 levels$"):
        run.lens(deep)
