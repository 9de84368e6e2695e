# Whatever a Python caller passes, the interpreter survives: wrong types, shapes and dtypes, bad ids and
# names, closed runs, misbehaving hooks, paths that are not runs. Each is a Python exception with a one-line
# message naming the argument. Also run under the ASan build (cmake/python.cmake).
import os
import re

import numpy as np
import pytest

import attograd

INPUT = "BOS 3 1 4 1 5 9"


def one_line(excinfo):
    text = str(excinfo.value)
    assert text and "\n" not in text, text
    return text


def test_load_run_paths(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        attograd.load_run(str(tmp_path / "missing"))
    assert "missing: not a run folder" in one_line(e)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RuntimeError):
        attograd.load_run(str(tmp_path / "file"))
    with pytest.raises(RuntimeError, match="model.safetensors: missing"):
        attograd.load_run(str(tmp_path))
    with pytest.raises(TypeError):
        attograd.load_run(42)


@pytest.mark.parametrize("ids,message", [
    (np.array([0.0, 1.0]), r"ids: expected integer token ids, got dtype float64 of shape \(2,\)"),
    (np.zeros((1, 2, 3), np.int32), r"ids: expected a non-empty shape \(T,\) or \(B, T\), got shape \(1, 2, 3\)"),
    (np.zeros((0,), np.int64), r"ids: expected a non-empty shape"),
    ([0, 1, 99], "ids: token id 99 at index 2 is outside the vocabulary 0..32"),
    ([0, -1], "ids: token id -1 at index 1 is outside the vocabulary"),
    (np.zeros(200, np.int64), "ids: 200 tokens, but the model takes at most max_len"),
    (None, "ids: expected token ids"),
    ([[0, 1], [2]], None),
])
def test_bad_ids(run, ids, message):
    with pytest.raises((ValueError, TypeError)) as e:
        run.forward(ids)
    if message:
        assert re.search(message, one_line(e)), str(e.value)
    with pytest.raises((ValueError, TypeError)):
        run.run_with_cache(ids)
    if message is None or "max_len" not in message:  # token_names names any ids, whatever max_len
        with pytest.raises((ValueError, TypeError)):
            run.token_names(ids)


def test_bad_tokens_points_and_hooks(run):
    with pytest.raises(ValueError, match="text: unknown token") as e:
        run.tokens("BOS 3 frog")
    one_line(e)
    ids = run.tokens(INPUT)
    with pytest.raises(ValueError, match="blocks.7.attn.z") as e:
        run.run_with_cache(ids, names=["blocks.7.attn.z"])
    with pytest.raises(ValueError, match="nope"):
        run.forward(ids, hooks={"nope": lambda v, p: None})
    with pytest.raises(ValueError, match="hooks: expected a dict"):
        run.forward(ids, hooks=5)
    with pytest.raises(ValueError, match=r"hooks\[logits\]: expected a function"):
        run.forward(ids, hooks={"logits": 3})
    with pytest.raises(ValueError) as e:
        run.forward(ids, hooks={"blocks.0.attn.z": lambda v, p: np.zeros((1, 7, 8, 4), np.float32)})
    assert one_line(e) == ("hooks[blocks.0.attn.z] returned: expected a float32 array of shape (1, 7, 4, 8), "
                           "got float32 of shape (1, 7, 8, 4)")
    with pytest.raises(ValueError, match=r"expected a float32 array of shape \(1, 7, 32\), got float64"):
        run.forward(ids, hooks={"blocks.0.resid_pre": lambda v, p: np.zeros(v.shape)})
    with pytest.raises(ValueError, match="got str"):
        run.forward(ids, hooks={"blocks.0.resid_pre": lambda v, p: "zeros"})

    def raises(v, p):
        raise KeyError("from the hook")

    with pytest.raises(KeyError, match="from the hook"):
        run.forward(ids, hooks={"blocks.1.attn.pattern": raises})

    def writes(v, p):
        v[0] = 1

    # A hook's value is a writable copy: the write flows on, and the model stays as it was.
    plain = run.forward(ids)
    assert not np.array_equal(run.forward(ids, hooks={"blocks.0.resid_pre": writes}), plain)
    np.testing.assert_array_equal(run.forward(ids), plain)
    assert run.forward(ids).shape == (1, 7, 33)  # the run is still fine (32 values and BOS)


def test_bad_patch_and_study_arguments(run):
    with pytest.raises(ValueError, match="clean has 7 tokens but corrupt has 6"):
        run.patch(INPUT, "BOS 3 1 4 1 5")
    with pytest.raises(ValueError, match="give both answer and wrong"):
        run.patch(INPUT, INPUT, answer="3")
    with pytest.raises(ValueError, match="answer: unknown token 'x'"):
        run.patch(INPUT, INPUT, answer="x", wrong="3")
    with pytest.raises(ValueError, match="wrong: token id 40 is outside"):
        run.patch(INPUT, INPUT, answer=3, wrong=40)
    with pytest.raises(ValueError, match="answer and wrong are the same token"):
        run.patch(INPUT, INPUT, answer=3, wrong=3)
    with pytest.raises(ValueError, match=r"^clean/0: expected an integer, got an array$"):
        run.patch(np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64), answer=1, wrong=2)
    with pytest.raises(ValueError, match="mode: expected zero, mean or resample, got 'half'"):
        run.ablate(mode="half")
    with pytest.raises(ValueError, match="n 100000000: .*eval_size"):
        run.ablate(n=100000000)
    with pytest.raises(ValueError, match="k: expected at least 1"):
        run.ablate(mode="resample", k=0)
    with pytest.raises(ValueError, match=r"^mode: expected a string, got 3$"):
        run.ablate(mode=3)


def test_closed_runs(run):
    params = run.parameters()
    run.close()
    run.close()  # twice is fine
    for call in (lambda: run.forward([0, 1]), lambda: run.run_with_cache([0]), run.hook_points,
                 run.parameters, run.circuits, run.scores, run.eval, lambda: run.tokens("BOS"),
                 lambda: run.config, lambda: run.patch("BOS 1", "BOS 2")):
        with pytest.raises(RuntimeError, match="the run is closed"):
            call()
    assert params["ln_f.weight"].shape == (32,)


def test_bad_train_arguments(tmp_path):
    with pytest.raises(ValueError, match="config: expected a dict or a path, got int"):
        attograd.train(3)
    with pytest.raises(attograd.ConfigError):
        attograd.train({"modle": {}}, out=str(tmp_path / "a"))
    # What JSON cannot hold is a ConfigError naming where in the dict, as a config file's error would.
    with pytest.raises(attograd.ConfigError, match="^config: /train/lr: expected a finite number, got nan$"):
        attograd.train({"train": {"lr": float("nan")}}, out=str(tmp_path / "b"))
    with pytest.raises(attograd.ConfigError, match="^config: /train/lr: expected None, a bool, number, str, "
                       "list or dict, got object$"):
        attograd.train({"train": {"lr": object()}}, out=str(tmp_path / "c"))
    with pytest.raises(attograd.ConfigError, match="^config: /name: expected text \\(str\\), got bytes$"):
        attograd.train({"name": b"x"}, out=str(tmp_path / "c"))
    with pytest.raises(attograd.ConfigError, match="^config: /seed: integer out of range \\(64 bits\\)"):
        attograd.train({"seed": 2**70}, out=str(tmp_path / "c"))
    with pytest.raises(attograd.ConfigError, match="^config: /train: expected text keys, got a key of type int$"):
        attograd.train({"train": {1: 2}}, out=str(tmp_path / "c"))
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(attograd.ConfigError, match="nested deeper than 64 levels"):
        attograd.train({"train": {"betas": deep}}, out=str(tmp_path / "c"))
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
    with pytest.raises(ValueError, match="out: expected a folder, got an empty path"):
        attograd.train({}, out="")
    with pytest.raises(ValueError, match="progress: expected a function"):
        attograd.train({}, out=str(tmp_path / "d"), progress=5)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(Exception) as e:
        attograd.train({}, out=str(tmp_path / "taken"))
    one_line(e)
    assert os.listdir(tmp_path / "taken") == ["notes.txt"]


def test_bad_tensors():
    with pytest.raises(ValueError, match="values: expected a float32 array, got str"):
        attograd.Tensor("abc")
    with pytest.raises(ValueError, match="values: expected a float32 array, got int64"):
        attograd.Tensor(np.arange(3))
    with pytest.raises(ValueError, match="got a list that is not one"):
        attograd.Tensor([[1.0], [2.0, 3.0]])
    t = attograd.Tensor(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError):
        t @ attograd.Tensor64(np.ones((2, 2)))
    with pytest.raises(ValueError):
        attograd.reshape(t, [3, 3])
    with pytest.raises(ValueError):
        attograd.sum(t, dim=5)
    with pytest.raises(ValueError):
        t.item()
    with pytest.raises(ValueError, match="does not require grad"):
        attograd.sum(t).backward()
    strided = attograd.Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)[:, ::2])
    np.testing.assert_array_equal(strided.numpy(), [[0, 2], [4, 6], [8, 10], [12, 14]])


def test_each_hostile_argument_is_one_line(run):
    """The cases of issue 39: never pybind11's multi-line text, integers out of range refused, not wrapped."""
    t32 = attograd.Tensor(np.ones((2, 3), np.float32))
    cases = [
        (lambda: run.ablate(k=2**40), ValueError, "k"),
        (lambda: run.ablate(n=2**70), (ValueError, TypeError), "n"),
        (lambda: attograd.gradcheck(lambda t: t[0], [t32]), TypeError,
         r"inputs\[0\]: expected a Tensor64 \(gradcheck runs in float64\), got Tensor"),
        (lambda: attograd.gradcheck(lambda t: 3, [attograd.Tensor64(np.ones(2))]), TypeError,
         "f: expected to return a Tensor64, got int"),
        (lambda: attograd.gradcheck(lambda t: t[0], attograd.Tensor64(np.ones(2))), TypeError,
         "inputs: expected a list of Tensor64, got Tensor64"),
        (lambda: attograd.train({"name": b"x"}, out="/nonexistent/x"), attograd.ConfigError,
         "^config: /name: expected text \\(str\\), got bytes$"),
        (lambda: run.ablate(mode=b"zero"), ValueError, "^mode: expected text \\(str\\), got bytes$"),
        (lambda: attograd.cross_entropy(t32, [2**40, 0]), ValueError,
         r"targets: class id 1099511627776 at index 0 is outside 0..2"),
        (lambda: attograd.cross_entropy(t32, [1.7, 0]), TypeError,
         "targets: expected integer class ids, got dtype float64"),
        (lambda: attograd.cross_entropy(t32, [-5, 0]), ValueError, "targets: class id -5"),
        (lambda: attograd.cross_entropy(t32, [0, 2**32 + 1]), ValueError, "targets: class id 4294967297 at index 1"),
        (lambda: attograd.cross_entropy(t32, [2**70, 0]), TypeError, "targets: expected integer class ids, got "
                                                                     "dtype object"),
        (lambda: attograd.cross_entropy(t32, np.array([2**64 - 1, 0], np.uint64)), ValueError,
         "targets: class id 18446744073709551615 at index 0 is outside 0..2"),
        (lambda: attograd.cross_entropy(t32, [0, 1], ignore_index=2**40), TypeError,
         r"cross_entropy\(\): expected arguments .*got \(Tensor, list, ignore_index=int\)"),
        (lambda: attograd.tanh("x"), TypeError, r"tanh\(\): expected arguments \(a: attograd.Tensor\) or "
                                                r"\(a: attograd.Tensor64\), got \(str\)"),
        (lambda: attograd.load_run(42), TypeError, r"load_run\(\): expected arguments \(path: str\), got \(int\)"),
        (lambda: attograd.Tensor(np.ones(2, np.float32), requires_grad="yes"), TypeError, "got \\(ndarray, "
                                                                                           "requires_grad=str\\)"),
        (lambda: run.forward([0, 1], loss_per_token=[]), TypeError, "loss_per_token=list"),
        (lambda: run.token_names(2**40), ValueError, "ids: token id 1099511627776"),
        (lambda: run.to_tokens(b"BOS 3"), TypeError, "text: expected token names"),
        (lambda: t32.sum(dim=2**40), ValueError, "dim: dim 1099511627776 is out of range"),
        (lambda: t32.permute(0, 2**70), ValueError, "axes: 1180591620717411303424 is out of range"),
        (lambda: t32.permute(0, 1.0), TypeError, "axes: expected a sequence of ints, got float in it"),
        (lambda: run.patch("BOS 1", "BOS 2", answer=2**70, wrong=1), ValueError, "answer"),
        (lambda: t32 + 2**2000, TypeError, "unsupported operand"),
    ]
    for i, (call, kind, message) in enumerate(cases):
        with pytest.raises(kind) as e:
            call()
        text = one_line(e)
        assert "Unable to cast" not in text and "incompatible function arguments" not in text, (i, text)
        assert re.search(message, text), (i, text)
    assert run.forward([0, 1]).shape[1] == 2  # the run is still fine


def test_numbers_and_arguments_are_checked_not_wrapped(run):
    # NaN passes no range: the request's field is named (tms's sparsity, importance).
    for field in ("sparsity", "importance"):
        with pytest.raises(ValueError) as e:
            attograd.tms(**{field: float("nan")}, steps=1)
        assert one_line(e) == field + ": expected a finite number, got nan"
    with pytest.raises(ValueError) as e:
        run.ablate(mode="resample", k=2**40)
    assert one_line(e).startswith("k: integer out of range")
    with pytest.raises(ValueError) as e:
        run.ablate(mode="resample", seed=-1)
    assert one_line(e).startswith("seed: expected a non-negative integer")
    with pytest.raises(ValueError) as e:
        run.ablate(mode="resample", k=2**70)
    assert one_line(e).startswith("k: integer out of range (64 bits)")



def test_ids_beyond_the_task_inside_the_model_are_valid(tmp_path):
    # reverse's task has 12 tokens; the model 40: ids 12..39 are the model's, shown as <id N>.
    out = str(tmp_path / "big")
    attograd.train({"task": {"kind": "reverse", "vocab": 10, "length": 8},
                    "model": {"vocab": 40, "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
                    "train": {"steps": 3, "batch_size": 8, "eval_size": 16, "threads": 1},
                    "output": {"attention_every": 0}}, out=out)
    run = attograd.load_run(out)
    try:
        assert run.token_names([0, 35]) == ["BOS", "<id 35>"]
        r = run.patch("BOS 1 2 SEP", "BOS 3 4 SEP", answer=35, wrong=1)
        assert r["answer"] == 35
        with pytest.raises(ValueError) as e:
            run.patch("BOS 1 2 SEP", "BOS 3 4 SEP", answer=40, wrong=1)
        assert "0..39" in one_line(e)
    finally:
        run.close()


REVERSE = {"seed": 1, "task": {"kind": "reverse", "vocab": 10, "length": 8},
           "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
           "train": {"steps": 2, "batch_size": 4, "threads": 1}}


@pytest.mark.parametrize("call,error,message", [
    (lambda: attograd.nn.Linear(0, 3), ValueError, r"^in_features: expected an int in 1\.\.1048576, got 0$"),
    (lambda: attograd.nn.Linear(2**40, 3), ValueError, r"^in_features: expected an int in 1\.\.1048576"),
    (lambda: attograd.nn.Linear(2.5, 3), TypeError, r"^in_features: expected an int"),
    (lambda: attograd.nn.Linear(3, 3, seed=-1), ValueError, r"^seed: expected a non-negative int"),
    (lambda: attograd.nn.Linear(3, 3)("x"), TypeError, r"^x: expected an attograd.Tensor \(float32\), got str$"),
    (lambda: attograd.nn.Linear(3, 3)(attograd.Tensor(np.ones((2, 4), np.float32))), ValueError,
     r"^x: expected a tensor of 1 or more dims whose last is 3, got shape \(2, 4\)$"),
    (lambda: attograd.nn.LayerNorm(4, eps=float("nan")), ValueError, r"^eps: expected a finite number"),
    (lambda: attograd.nn.MultiHeadAttention(8, 3), ValueError, r"^n_heads: expected a divisor of d_model 8, got 3$"),
    (lambda: attograd.nn.MultiHeadAttention(8, 2)(attograd.Tensor(np.ones((5, 8), np.float32))), ValueError,
     r"^x: expected a tensor of 3 or more dims"),
    (lambda: attograd.nn.TransformerBlock({"d_model": 8, "n_heads": 3}), ValueError, r"model/n_heads"),
    (lambda: attograd.nn.TransformerBlock({"d_modl": 8}), ValueError, r"d_modl"),
    (lambda: attograd.nn.CausalLM(3), ValueError, r"^config: expected a dict or a path, got int$"),
    (lambda: attograd.nn.CausalLM(REVERSE).loss([[0, 1]], [[1, 2**40]]), ValueError,
     r"^targets: id 1099511627776 at index 1 is outside the vocabulary 0\.\.11 \(or -1, not scored\)$"),
    (lambda: attograd.nn.CausalLM(REVERSE).loss([[0, 1]], [[1.5, 2]]), TypeError, r"^targets: expected integer"),
    (lambda: attograd.nn.CausalLM(REVERSE).loss([[0, 1]], [1, 2, 3]), ValueError,
     r"^targets: expected shape \(1, 2\) \(the ids'\), got \(3,\)$"),
    (lambda: attograd.nn.CausalLM(REVERSE).forward_backward([[0, 1]], [[1, 2]], shards=5), ValueError,
     r"^shards: expected an int in 1\.\.1, got 5$"),
    (lambda: attograd.nn.CausalLM(REVERSE).load_state_dict({"x": 1}), ValueError, r"^state_dict: missing parameter"),
    (lambda: attograd.nn.Linear(2, 2).load_state_dict({"weight": np.zeros((2, 2), np.float32),
                                                     "bias": np.zeros(2, np.float32), "w": 0}), ValueError,
     r"^state_dict: unknown parameter 'w'$"),
    (lambda: attograd.nn.Linear(2, 2).load_state_dict({"weight": np.zeros((3, 2), np.float32),
                                                     "bias": np.zeros(2, np.float32)}), ValueError,
     r"^state_dict\[weight\]: expected a float32 array of shape \(2, 2\)"),
    (lambda: attograd.optim.AdamW([]), ValueError, r"^params: expected at least one parameter, got none$"),
    (lambda: attograd.optim.AdamW("w"), TypeError, r"^params: expected a module, a Tensor"),
    (lambda: attograd.optim.AdamW([[attograd.nn.Linear(2, 2)]]), TypeError, r"^params\[0\]: expected a module"),
    (lambda: attograd.optim.AdamW(attograd.Tensor(np.ones(2, np.float32))), ValueError,
     r"^params: params does not require grad"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2), lr=-1), ValueError, r"^lr: expected a finite number"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2), lr="x"), TypeError, r"^lr: expected a number, got str$"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2), betas=(0.9,)), ValueError, r"^betas: expected a pair"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2), betas=(0.9, 1.5)), ValueError, r"^betas\[1\]: expected"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2), decay="some"), ValueError, r"^decay: expected"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2)).load_state_dict({"step": 1}), ValueError,
     r"^state_dict: missing 'm'$"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2)).clip_grad_norm(float("inf")), ValueError,
     r"^max_norm: expected a finite number"),
    (lambda: attograd.optim.learning_rate(REVERSE, -1), ValueError, r"^step: expected a non-negative int"),
    (lambda: attograd.Task(REVERSE).batch(3), ValueError, r"^step: the data stream is drawn in order, expected step 0, got 3$"),
    (lambda: attograd.Task(REVERSE).heldout(0), ValueError, r"^n: expected an int in 1\.\."),
    (lambda: attograd.utils.get_act_name("zz", 0), ValueError, r"^name: expected one of"),
    (lambda: attograd.utils.get_act_name("z"), ValueError, r"^layer: 'z' is a point of a block"),
    (lambda: attograd.nn.Linear(), TypeError, r"^Linear\(\): expected arguments"),
    (lambda: attograd.optim.AdamW(attograd.nn.Linear(2, 2)).step(3), TypeError, r"^step\(\): expected arguments"),
])
def test_engine_modules_and_optimisers_refuse_bad_arguments(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert re.search(message, one_line(e)), str(e.value)
