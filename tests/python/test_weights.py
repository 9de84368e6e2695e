# The weights in TransformerLens's names and shapes: each reads what the forward uses (checked against the
# cache: q = ln1.out W_Q + b_Q, each head's result = z W_O, ...), a setter writes it back (round trip, one-line
# errors on a wrong shape or value), load_state_dict and save write a run folder the tools read.
import numpy as np
import pytest

import attograd
from conftest import cli_json

INPUT = "BOS 5 9 3 7 12 5"


def test_weights_are_what_the_forward_uses(run):
    ids = run.to_tokens(INPUT)
    logits, cache = run.run_with_cache(ids, names=lambda n: True)
    L, H, D, dk = 2, 4, 32, 8
    assert run.W_E.shape == (33, D) and run.W_pos.shape == (32, D) and run.W_U.shape == (D, 33)
    assert run.W_Q.shape == (L, H, D, dk) and run.W_O.shape == (L, H, dk, D) and run.b_Q.shape == (L, H, dk)
    assert run.b_O.shape == (L, D) and run.QK.shape == (L, H, D, D) and run.OV.shape == (L, H, D, D)
    np.testing.assert_array_equal(run.W_E[ids[0]], cache["embed"][0])
    np.testing.assert_array_equal(run.W_pos[: ids.shape[1]], cache["pos_embed"][0])
    for l in range(L):
        x = cache[f"blocks.{l}.ln1.out"][0]
        for name, W, b in (("q", run.W_Q, run.b_Q), ("k", run.W_K, run.b_K), ("v", run.W_V, run.b_V)):
            want = np.einsum("td,hde->the", x, W[l]) + b[l]
            np.testing.assert_allclose(want, cache[f"blocks.{l}.attn.{name}"][0], rtol=0, atol=1e-5)
        z = cache[f"blocks.{l}.attn.z"][0]
        np.testing.assert_allclose(np.einsum("the,hed->thd", z, run.W_O[l]), cache[f"blocks.{l}.attn.result"][0],
                                   rtol=0, atol=1e-5)
        np.testing.assert_allclose(np.einsum("the,hed->td", z, run.W_O[l]) + run.b_O[l],
                                   cache[f"blocks.{l}.attn.out"][0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(run.QK[l], run.W_Q[l] @ np.swapaxes(run.W_K[l], 1, 2), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cache["ln_f.out"][0] @ run.W_U + run.b_U, logits[0], rtol=0, atol=1e-5)
    with pytest.raises(AttributeError, match="mlp.up.weight: not in this model"):
        run.W_in  # attention-only


def test_setters_round_trip_and_write_the_model(run):
    ids = run.to_tokens(INPUT)
    before = run.forward(ids)
    names = ["W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_U", "b_U"]
    for name in names:
        setattr(run, name, getattr(run, name))
    np.testing.assert_array_equal(run.forward(ids), before)  # a round trip changes no bit
    W_Q = run.W_Q
    W_Q[1, 2] *= 0
    run.W_Q = W_Q
    np.testing.assert_array_equal(run.W_Q, W_Q)
    wq = run.parameters()["blocks.1.attn.wq.weight"]
    assert np.all(wq[16:24] == 0) and np.any(wq[8:16] != 0)  # head 2's rows of PyTorch's (out, in) weight
    assert np.abs(run.forward(ids) - before).max() > 1e-4
    run.W_Q = W_Q.astype(np.float64)  # float64 is taken as float32


def test_weight_errors_are_one_line(run):
    with pytest.raises(ValueError, match=r"^W_Q: expected shape \(2, 4, 32, 8\), got \(2, 4, 32\)$"):
        run.W_Q = np.zeros((2, 4, 32))
    bad = run.W_U
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="^W_U: expected finite values"):
        run.W_U = bad
    with pytest.raises(ValueError, match="^W_in: this model has no mlp.up.weight$"):
        run.W_in = np.zeros((2, 32, 128))
    with pytest.raises(ValueError, match=r"^state_dict: no parameter blocks.0.attn.W_Q in this model"):
        run.load_state_dict({"blocks.0.attn.W_Q": np.zeros((32, 32))})
    with pytest.raises(ValueError, match=r"^state_dict\[ln_f.bias\]: expected shape \(32,\), got \(3,\)$"):
        run.load_state_dict({"ln_f.bias": np.zeros(3)}, strict=False)
    with pytest.raises(ValueError, match=r"^state_dict: missing 25 parameter\(s\), first tok_emb.weight"):
        run.load_state_dict({"ln_f.bias": np.zeros(32)})
    with pytest.raises(TypeError, match="^state_dict: expected a dict"):
        run.load_state_dict([1])


def test_load_state_dict_and_save_make_a_run_every_tool_reads(run, tmp_path):
    ids = run.to_tokens(INPUT)
    params = {k: v.copy() for k, v in run.parameters().items()}
    params["lm_head.weight"] *= 2
    run.load_state_dict(params)
    np.testing.assert_array_equal(run.parameters()["lm_head.weight"], params["lm_head.weight"])
    out = str(tmp_path / "edited")
    run.save(out)
    with attograd.load_run(out) as saved:
        for k, v in run.parameters().items():
            np.testing.assert_array_equal(saved.parameters()[k], v)
        np.testing.assert_array_equal(saved.forward(ids), run.forward(ids))
        assert saved.step == run.step
    assert cli_json("lens", out, "--tokens", INPUT, "--answer", "9", "--json") == run.lens(INPUT, answer="9")
    with pytest.raises(ValueError, match="^path: .* already holds a run"):
        run.save(out)


def test_mlp_weights_are_what_the_forward_uses(modadd_dir):
    with attograd.load_run(modadd_dir) as r:
        vocab = r.vocab
        ids = r.to_tokens(" ".join(vocab[i] for i in (3, 5)))
        _, cache = r.run_with_cache(ids)
        F, D = r.config["model"]["d_ff"], r.config["model"]["d_model"]
        assert r.W_in.shape == (1, D, F) and r.W_out.shape == (1, F, D) and r.b_in.shape == (1, F)
        x = cache["blocks.0.ln2.out"][0] if "blocks.0.ln2.out" in cache else cache["blocks.0.resid_mid"][0]
        pre = x @ r.W_in[0] + (r.b_in[0] if "blocks.0.mlp.fc1.bias" in r.parameters() else 0)
        np.testing.assert_allclose(pre, cache["blocks.0.mlp.pre"][0], rtol=0, atol=1e-5)
        out = cache["blocks.0.mlp.post"][0] @ r.W_out[0] + (r.b_out[0] if "blocks.0.mlp.fc2.bias" in r.parameters() else 0)
        np.testing.assert_allclose(out, cache["blocks.0.mlp.out"][0], rtol=0, atol=1e-5)
        r.W_in = r.W_in
        r.W_out = r.W_out


def test_grouped_query_weights_have_the_kv_heads(tmp_path):
    # 4 query heads on 2 kv heads, layer 0 local (window 3): W_K, W_V, b_K and b_V have the kv heads and
    # give attn.k and attn.v; QK pairs each query head with its kv head h // 2; the pattern sees 3 keys.
    from conftest import INDUCTION_SETS, config_path
    out = str(tmp_path / "gqa")
    sets = [s for s in INDUCTION_SETS if not s.startswith("train.steps")]
    attograd.train(config_path("induction.json"), out=out,
                   set=sets + ["train.steps=20", "model.n_kv_heads=2", "model.attn_window=[3,0]"])
    run = attograd.load_run(out)
    ids = run.to_tokens(INPUT)
    _, cache = run.run_with_cache(ids, names=lambda n: True)
    L, H, D, dk = 2, 4, 32, 8
    assert run.W_K.shape == (L, 2, D, dk) and run.W_V.shape == (L, 2, D, dk) and run.b_K.shape == (L, 2, dk)
    assert run.W_Q.shape == (L, H, D, dk) and run.QK.shape == (L, H, D, D) and run.OV.shape == (L, H, D, D)
    for l in range(L):
        x = cache[f"blocks.{l}.ln1.out"][0]
        for name, W, b in (("k", run.W_K, run.b_K), ("v", run.W_V, run.b_V)):
            want = np.einsum("td,hde->the", x, W[l]) + b[l]
            np.testing.assert_allclose(want, cache[f"blocks.{l}.attn.{name}"][0], rtol=0, atol=1e-5)
        for h in range(H):
            np.testing.assert_allclose(run.QK[l, h], run.W_Q[l, h] @ run.W_K[l, h // 2].T, rtol=1e-6, atol=1e-6)
    pattern = cache["blocks.0.attn.pattern"][0]  # (H, T, T)
    T = pattern.shape[-1]
    for t in range(T):
        first = max(0, t - 2)  # the window's first key
        assert np.all(pattern[:, t, :first] == 0) and np.allclose(pattern[:, t, first: t + 1].sum(-1), 1)
    run.W_K = run.W_K  # the setter takes the kv heads' shape
    with pytest.raises(ValueError, match=r"W_K: expected shape \(2, 2, 32, 8\)"):
        run.W_K = np.zeros((L, H, D, dk))


def test_qkv_bias_weights_read_the_view(tmp_path):
    # model.qkv_bias without model.bias (Qwen2's attention): b_Q, b_K and b_V exist and give attn.q, .k and
    # .v; b_O does not, and saying so is one line. The weights come from the model's view, not its names.
    from conftest import INDUCTION_SETS, config_path
    out = str(tmp_path / "qkv")
    sets = [s for s in INDUCTION_SETS if not s.startswith("train.steps")]
    attograd.train(config_path("induction.json"), out=out,
                   set=sets + ["train.steps=20", "model.bias=false", "model.qkv_bias=true", "model.n_kv_heads=2"])
    run = attograd.load_run(out)
    assert "blocks.0.attn.wq.bias" in run.parameters() and "blocks.0.attn.wo.bias" not in run.parameters()
    _, cache = run.run_with_cache(run.to_tokens(INPUT), names=lambda n: True)
    for l in range(2):
        x = cache[f"blocks.{l}.ln1.out"][0]
        for name, W, b in (("q", run.W_Q, run.b_Q), ("k", run.W_K, run.b_K), ("v", run.W_V, run.b_V)):
            assert np.abs(b[l]).max() > 0  # trained: the biases moved from their zero init
            want = np.einsum("td,hde->the", x, W[l]) + b[l]
            np.testing.assert_allclose(want, cache[f"blocks.{l}.attn.{name}"][0], rtol=0, atol=1e-5)
    with pytest.raises(AttributeError, match="attn.output.bias: not in this model"):
        run.b_O
