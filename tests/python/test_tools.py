# Every study tool of the registry (study/tools.h) called from Python gives what `attograd TOOL --json`
# prints on the same run: one case per tool, and a test that no tool lacks one.
import atexit
import json
import os
import re
import shutil
import tempfile

import numpy as np
import pytest

import attograd
from conftest import SOURCE_DIR, cli, cli_json, config_path

HERE = os.path.dirname(os.path.abspath(__file__))
SAE_CONFIG = os.path.join(HERE, "sae_tiny.json")
SAE_SYNTHETIC_CONFIG = os.path.join(HERE, "sae_synthetic_tiny.json")
CLEAN = "BOS 5 9 3 7 12 4 5 9 3 7 12"
CORRUPT = "BOS 5 9 3 7 12 4 5 9 3 20 12"

# A tiny architecture for the whole-model gradient check: seconds, not minutes.
GRADCHECK_SETS = ["task.length=3", "model.max_len=8"]

# What a bench measures changes from run to run; what it measured on does not.
def bench_setting(result):
    return {k: result[k] for k in ("impl", "config", "mode", "threads", "shards", "params", "cpu",
                                   "vector_isa", "vector_bits", "peak_fma_gflops")} | {"keys": sorted(result)}


BENCH_CONFIG = f"{SOURCE_DIR}/bench/configs/tiny.json"

# `import` writes a new run folder: each front end its own, so the printed "run" differs.
IMPORT_SRC = f"{SOURCE_DIR}/tests/fixtures/import/gpt2"
IMPORT_OUT = tempfile.mkdtemp(prefix="attograd-import-")
atexit.register(shutil.rmtree, IMPORT_OUT, True)


def without_run(result):
    return {k: v for k, v in result.items() if k != "run"}


# name: (the Python call on an open Run (the argument is None for a tool that reads no run), the program's
# arguments after the tool's name; "{run}" is the run folder[, the fixture that makes the run when it is not
# the induction run (None: the induction run)[, what to compare of both results, when some of it is
# measured rather than computed]]).
# "{sweep}" and "{sweep_out}" are a trained two-run sweep's file and out folder: the call then gets the sweep.
CASES = {
    "demo": (lambda _: attograd.demo(3), ["--section", "3"]),
    "bench": (lambda _: attograd.bench(BENCH_CONFIG, steps=2, warmup=0, threads=1, peak_gflops=100.0),
              [BENCH_CONFIG, "--steps", "2", "--warmup", "0", "--threads", "1", "--peak-gflops", "100"], None,
              bench_setting),
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
    "scores": (lambda run: run.scores(), ["{run}"]),
    "entropy": (lambda run: run.entropy(n=16), ["{run}", "--n", "16"]),
    "ablate": (lambda run: run.ablate("resample", 16, True, 3, 5),
               ["{run}", "--mode", "resample", "--n", "16", "--per-position", "--k", "3", "--seed", "5"]),
    "circuits": (lambda run: run.circuits(), ["{run}"]),
    "fourier": (lambda run: run.fourier(), ["{run}"], "modadd_dir"),
    "gradcheck": (lambda _: attograd.gradcheck(config_path("induction.json"), set=GRADCHECK_SETS),
                  [config_path("induction.json")] + [a for s in GRADCHECK_SETS for a in ("--set", s)]),
    # Each front end writes its own folder beside the run (the session's run folder stays as trained).
    "sae": (lambda run: run.sae("blocks.0.resid_post", config=SAE_CONFIG,
                                out=os.path.join(run.path, "..", "sae-python")),
            ["{run}", "--at", "blocks.0.resid_post", "--config", SAE_CONFIG, "--out", "{run}/../sae-cli"]),
    "transcoder": (lambda run: run.transcoder(config=SAE_CONFIG, out=os.path.join(run.path, "..", "tc-python")),
                   ["{run}", "--config", SAE_CONFIG, "--out", "{run}/../tc-cli"], "modadd_dir"),
    "graph": (lambda run: run.graph("BOS 5 9 3 7 12 5 9", node_threshold=0.7),
              ["{run}", "--tokens", "BOS 5 9 3 7 12 5 9", "--node-threshold", "0.7"]),
    "sae_synthetic": (lambda run: attograd.sae_synthetic(features=16, dim=8, p=0.1, sae_features=32,
                                                         seed=3, config=SAE_SYNTHETIC_CONFIG),
                      ["--features", "16", "--dim", "8", "--p", "0.1", "--sae-features", "32", "--seed", "3",
                       "--config", SAE_SYNTHETIC_CONFIG]),
    "tms": (lambda run: attograd.tms(n=5, m=2, sparsity=0.9, importance=0.8, steps=60, seed=2),
            ["--n", "5", "--m", "2", "--sparsity", "0.9", "--importance", "0.8", "--steps", "60", "--seed",
             "2"]),
    "import": (lambda _: attograd.import_model(IMPORT_SRC, out=os.path.join(IMPORT_OUT, "python")),
               [IMPORT_SRC, "--out", os.path.join(IMPORT_OUT, "cli")], None, without_run),
    # Again over a finished sweep: every run is found finished and skipped, the summary rewritten.
    "sweep": (lambda sweep: attograd.sweep(sweep["file"], jobs=2), ["{sweep}", "-j", "2"]),
    "sweep_collect": (lambda sweep: attograd.sweep_collect(sweep["out"]), ["{sweep_out}"]),
}
# The program's words for a tool when they are not its name, and the keys that cannot agree (wall time).
COMMANDS = {"sae_synthetic": ["sae", "synthetic"], "sweep_collect": ["sweep", "collect"]}
UNEQUAL = {"sae_synthetic": ["seconds"]}


def test_every_tool_has_a_case():
    assert sorted(t["name"] for t in attograd.tools()) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_python_call_equals_the_command_lines_json(name, request):
    call, args, fixture, compared = (list(CASES[name]) + [None, None])[:4]
    compared = compared or (lambda result: result)
    tool = next(t for t in attograd.tools() if t["name"] == name)
    command = COMMANDS.get(name, [name])

    def agree(got, want):
        for key in UNEQUAL.get(name, []):
            assert isinstance(got.pop(key), float) and isinstance(want.pop(key), float)
        assert compared(got) == compared(want)

    if any("{sweep" in a for a in args):
        sweep = request.getfixturevalue("sweep_dir")
        args = [a.replace("{sweep_out}", sweep["out"]).replace("{sweep}", sweep["file"]) for a in args]
        agree(call(sweep), cli_json(*command, *args, "--json"))
        return
    if not tool["reads_run"]:
        agree(call(None), cli_json(*command, *args, "--json"))
        return
    folder = request.getfixturevalue(fixture or "induction_dir")
    want = cli_json(*command, *[a.replace("{run}", folder) for a in args], "--json")
    with attograd.load_run(folder) as run:
        agree(call(run), want)


def test_gradcheck_is_the_engines_for_a_function_and_the_tools_for_a_config():
    import numpy as np
    r = attograd.gradcheck(lambda t: t[0] * t[0], [attograd.Tensor64(np.array([1.0, 2.0]))])
    assert set(r) == {"worst", "per_input", "report"}
    with pytest.raises(TypeError, match=r"^inputs\[0\]: expected a Tensor64 \(gradcheck runs in float64\), got Tensor$"):
        attograd.gradcheck(lambda t: t[0], [attograd.Tensor(np.array([1.0], np.float32))])  # float32: refused
    with pytest.raises(ValueError, match=r"^tolerance: must be > 0"):
        attograd.gradcheck(config_path("induction.json"), tolerance=0.0)
    with pytest.raises(ValueError, match=r"^config: must not be empty$"):
        attograd.gradcheck(set=["seed=1"])


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
    with pytest.raises(ValueError, match=r"^input: nested deeper than 64 levels$"):
        run.lens(deep)


def whole_sequences(run, n):
    """The held-out set's first n sequences whole (inputs and the last target), as a user would write them."""
    s = run.sample(n)
    assert (s["targets"][:, -1] >= 0).all()  # the last position is scored: its target is the last token
    return np.concatenate([s["ids"], s["targets"][:, -1:]], axis=1)


def test_scores_and_ablate_on_given_sequences_equal_the_held_out_set(run):
    seqs = whole_sequences(run, 64)  # the fixture's eval_size: scores() reads these 64
    assert run.scores(ids=seqs) == run.scores()
    assert run.scores(ids=seqs[:8]) != run.scores()
    for mode in ("zero", "mean"):
        assert run.ablate(mode=mode, ids=seqs[:16]) == run.ablate(mode=mode, n=16)
    # Names work as ids do, BOS put in front when missing; the command line's --tokens gives the same.
    names = [" ".join(run.token_names(row[1:])) for row in seqs[:4]]
    assert run.ablate(mode="zero", ids=names) == run.ablate(mode="zero", ids=seqs[:4])
    tokens = [a for n in names for a in ("--tokens", n)]
    assert run.ablate(mode="zero", ids=names) == cli_json("ablate", run.path, "--mode", "zero", "--json", *tokens)
    assert run.scores(ids=names) == cli_json("scores", run.path, "--json", *tokens)


@pytest.mark.parametrize("call,message", [
    (lambda run: run.scores(ids=[]), r"^ids: expected a list of sequences"),
    (lambda run: run.scores(ids="BOS 5"), r"^ids: expected a list of sequences"),
    (lambda run: run.scores(ids=[[0, 1.5]]), r"^ids/0: expected integer token ids, got"),
    (lambda run: run.scores(ids=[[0, 99]]), r"^ids\[0\]: 99 is not a token id in 0\.\.32$"),
    (lambda run: run.scores(ids=[[0]]), r"^ids\[0\]: expected a whole sequence of the task, 33 tokens "
                                         r"\(the model reads all but the last\), got 1$"),
    (lambda run: run.scores(ids=[CLEAN]), r"^ids\[0\]: expected a whole sequence of the task, 33 tokens"),
    (lambda run: run.ablate(mode="zero", n=4, ids=["5 9 3"]), r"^n: the sequences are the ids given"),
    (lambda run: run.ablate(mode="resample", ids=whole_sequences(run, 1)), r"^mode resample: needs at least 2"),
])
def test_given_sequences_refuse_bad_input(run, call, message):
    with pytest.raises(ValueError) as e:
        call(run)
    assert "\n" not in str(e.value) and re.search(message, str(e.value)), str(e.value)


def test_import_model_errors_are_the_command_lines():
    with pytest.raises(ValueError, match=r"^src: .*: not a folder$"):
        attograd.import_model(os.path.join(IMPORT_OUT, "absent"), out=os.path.join(IMPORT_OUT, "x"))
    # A config that disagrees with its tensors (2 kv heads, full-width k_proj): refused once the reading has
    # begun, and the run folder is not left behind.
    src = os.path.join(IMPORT_OUT, "llama_kv2")
    shutil.copytree(f"{SOURCE_DIR}/tests/fixtures/import/llama", src)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["num_key_value_heads"] = 2
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match=r"k_proj\.weight: shape \[\d+, \d+\], but config\.json implies"):
        attograd.import_model(src, out=os.path.join(IMPORT_OUT, "y"))
    assert not os.path.exists(os.path.join(IMPORT_OUT, "y"))
