# attograd.load_run: the module's numbers against the attograd program's on the same checkpoint (forward's
# logits and attention, patch, circuits, ablation, eval), the checkpoint file itself (parameters), and hooks.
import json
import struct

import numpy as np
import pytest

import attograd
from conftest import cli, cli_json

CLEAN = "BOS 5 9 3 7 12 4 5 9 3 7 12"
CORRUPT = "BOS 5 9 3 7 12 4 5 9 3 20 12"
INPUT = "BOS 3 1 4 1 5 9 2 6 3 1 4"


def test_config_tokens_and_names(run, induction_dir):
    with open(f"{induction_dir}/config.json") as f:
        assert run.config == json.load(f)
    ids = run.tokens(INPUT)
    assert ids.dtype == np.int32 and ids.shape == (12,)
    assert ids[0] == 0 and list(ids[1:4]) != list(ids[4:7])
    assert run.token_names(ids) == INPUT.split()
    assert run.step == 150


def test_forward_matches_the_command_line(run, induction_dir):
    ids = run.tokens(INPUT)
    out = cli_json("forward", induction_dir, "--tokens", INPUT, "--json")
    cli_logits = np.array(out["logits"], dtype=np.float32)
    logits = run.forward(ids)
    assert logits.shape == (1, 12, run.config["model"]["vocab"]) and logits.dtype == np.float32
    # forward without hooks is the fused training forward: equal to float rounding.
    np.testing.assert_allclose(logits[0], cli_logits, rtol=0, atol=2e-5)
    # run_with_cache is the reference forward, as the program's: the same bits.
    ref, cache = run.run_with_cache(ids, names=["blocks.1.attn.pattern"])
    np.testing.assert_array_equal(ref[0], cli_logits)
    pattern = cache["blocks.1.attn.pattern"]
    assert pattern.shape == (1, 4, 12, 12)
    for m in out["attention"]:
        if m["layer"] == 1:
            np.testing.assert_array_equal(pattern[0, m["head"]], np.array(m["weights"], dtype=np.float32))
    assert list(np.argmax(logits[0], axis=-1)) == out["predictions"]


def test_batched_forward_equals_each_row(run):
    a, b = run.tokens(INPUT), run.tokens(CLEAN)
    both = run.forward(np.stack([a, b]))
    assert both.shape[0] == 2
    np.testing.assert_allclose(both[1], run.forward(b)[0], atol=1e-5)
    np.testing.assert_allclose(both[0], run.forward(list(map(int, a)))[0], atol=1e-5)


def test_cache_holds_every_point_in_its_shape(run):
    ids = run.tokens(INPUT)
    logits, cache = run.run_with_cache(ids)
    assert list(cache) == run.hook_points()
    cfg = run.config["model"]
    D, H, T = cfg["d_model"], cfg["n_heads"], 12
    assert cache["blocks.0.resid_pre"].shape == (1, T, D)
    assert cache["blocks.0.attn.z"].shape == (1, T, H, D // H)
    assert cache["blocks.1.attn.scores"].shape == (1, H, T, T)
    np.testing.assert_allclose(cache["blocks.0.attn.pattern"].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(cache["logits"], logits)
    # resid_post = resid_mid (attention-only) = resid_pre + attn.out
    np.testing.assert_allclose(cache["blocks.0.resid_post"],
                               cache["blocks.0.resid_pre"] + cache["blocks.0.attn.out"], atol=1e-5)


def test_hooks_read_and_replace(run):
    ids = run.tokens(INPUT)
    calls = {}

    def count(value, point):
        calls[point] = calls.get(point, 0) + 1
        assert value.flags.writeable  # a copy: written in place, it flows on (test_tl_names.py)
        return None

    hooks = {p: count for p in run.hook_points()}
    plain = run.forward(ids)
    np.testing.assert_allclose(run.forward(ids, hooks=hooks), plain, atol=2e-5)
    run.forward(ids, hooks=hooks)
    assert calls == {p: 2 for p in run.hook_points()}  # once per point per call

    # Zeroing head 2's output of layer 1 through attn.z equals the program's zero ablation of that head
    # in kind: the logits change, and only through that head.
    def zero_head(z, point):
        z = z.copy()
        z[:, :, 2, :] = 0
        return z

    ablated = run.forward(ids, hooks={"blocks.1.attn.z": zero_head})
    assert not np.allclose(ablated, plain, atol=1e-4)
    # Replacing the logits replaces the output.
    seven = run.forward(ids, hooks={"logits": lambda v, p: np.full(v.shape, 7, np.float32)})
    np.testing.assert_array_equal(seven, 7)
    # A replacement identical to the value changes nothing.
    same = run.forward(ids, hooks={"blocks.0.resid_pre": lambda v, p: np.array(v)})
    np.testing.assert_allclose(same, plain, atol=2e-5)


def test_patch_circuits_ablate_eval_match_the_command_line(run, induction_dir):
    got = run.patch(CLEAN, CORRUPT, answer="4", wrong="20")
    want = cli_json("patch", induction_dir, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "4",
                    "--wrong", "20", "--json")
    assert got == want
    four, twenty = run.tokens("4 20")  # ids, not names: token "4" is id 5 (BOS is 0)
    assert run.patch(run.tokens(CLEAN), run.tokens(CORRUPT), answer=int(four), wrong=int(twenty)) == want
    assert run.circuits() == cli_json("circuits", induction_dir, "--json")
    assert run.ablate(mode="mean", n=16) == cli_json("ablate", induction_dir, "--mode", "mean", "--n", "16",
                                                      "--json")
    assert run.eval() == cli_json("eval", induction_dir, "--json")
    scores = run.scores()
    assert scores["step"] == 150 and len(scores["heads"]) == 8
    assert {"layer", "head", "induction", "previous_token"} <= set(scores["heads"][0])


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32"
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
    return out


def test_parameters_are_the_checkpoint(run, induction_dir):
    params = run.parameters()
    stored = read_safetensors(f"{induction_dir}/checkpoint/model.safetensors")
    assert sorted(params) == sorted(stored)
    for name, value in params.items():
        assert not value.flags.writeable
        np.testing.assert_array_equal(value, stored[name])
    assert params["blocks.0.attn.wq.weight"].shape == (32, 32)


def test_arrays_outlive_the_run(induction_dir):
    r = attograd.load_run(induction_dir)
    params = r.parameters()
    logits, cache = r.run_with_cache(r.tokens(INPUT))
    expected = params["tok_emb.weight"].copy()
    r.close()
    del r
    np.testing.assert_array_equal(params["tok_emb.weight"], expected)
    assert np.isfinite(cache["blocks.1.attn.pattern"]).all() and np.isfinite(logits).all()


def test_context_manager_closes(induction_dir):
    with attograd.load_run(induction_dir) as r:
        assert r.forward([0, 1, 2]).shape[1] == 3
    with pytest.raises(RuntimeError, match="the run is closed"):
        r.forward([0, 1, 2])
