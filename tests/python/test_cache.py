# The activation cache's helpers (TransformerLens's names) against `attograd lens --json` on the same input:
# each piece's direct logit attribution equals the lens's component or accumulated value (1e-6), the head
# results with the other pieces sum to the final residual (1e-5), and the new hook points embed, pos_embed
# and attn.result add up; on the attention-only induction run and the modular-addition run (with MLPs).
import numpy as np
import pytest

import attograd
from conftest import cli_json

INDUCTION_INPUT = "BOS 5 9 3 7 12 5"


def lens_of(run, tokens, answer, wrong):
    out = cli_json("lens", run.path, "--tokens", tokens, "--answer", answer, "--wrong", wrong, "--json")
    T = len(out["positions"])
    def by_name(rows, key):
        return {name: np.array([r["value"] for r in rows if r[key] == name])
                for name in dict.fromkeys(r[key] for r in rows)}
    acc, comp = by_name(out["accumulated"], "point"), by_name(out["components"], "name")
    assert all(len(v) == T for v in list(acc.values()) + list(comp.values()))
    return acc, comp


def check_against_lens(run, tokens, answer, wrong):
    ids = run.to_tokens(tokens)
    logits, cache = run.run_with_cache(ids)
    assert isinstance(cache, attograd.ActivationCache) and isinstance(cache, dict)
    acc, comp = lens_of(run, tokens, answer, wrong)
    L, H = run.config["model"]["n_layers"], run.config["model"]["n_heads"]
    bias = comp.get("ln_f.bias", 0) + comp.get("lm_head.bias", 0)

    # accumulated_resid through ln_f, then the metric: the lens's accumulated values (the biases apart).
    stack, labels = cache.accumulated_resid(apply_ln=True, return_labels=True)
    assert labels == [f"{l}_pre" for l in range(L)] + ["final_post"] and stack.shape[:3] == (L + 1, 1, len(ids[0]))
    attrs = cache.logit_attrs(stack, answer, incorrect_tokens=wrong)
    names = [f"blocks.{l}.resid_pre" for l in range(L)] + [f"blocks.{L - 1}.resid_post"]
    for i, name in enumerate(names):
        np.testing.assert_allclose(attrs[i, 0] + bias, acc[name], rtol=0, atol=1e-6)
    # The final one is the actual metric.
    metric = logits[0, :, run.vocab.index(answer)] - logits[0, :, run.vocab.index(wrong)]
    np.testing.assert_allclose(attrs[-1, 0] + bias, metric, rtol=0, atol=1e-4)

    # stack_head_results: each head's component.
    heads, head_labels = cache.stack_head_results(layer=-1, apply_ln=True, return_labels=True)
    assert head_labels == [f"L{l}H{h}" for l in range(L) for h in range(H)]
    head_attrs = cache.logit_attrs(heads, answer, wrong)
    for l in range(L):
        for h in range(H):
            np.testing.assert_allclose(head_attrs[l * H + h, 0], comp[f"blocks.{l}.attn.head.{h}"], rtol=0,
                                       atol=1e-6)

    # decompose_resid: embed, pos_embed, each attn.out (its heads plus Wo's bias) and each MLP.
    parts, part_labels = cache.decompose_resid(apply_ln=True, return_labels=True)
    part_attrs = cache.logit_attrs(parts, answer, wrong)
    mlp = "blocks.0.mlp" in comp
    expected_labels = ["embed", "pos_embed"]
    for l in range(L):
        expected_labels += [f"{l}_attn_out"] + ([f"{l}_mlp_out"] if mlp else [])
    assert part_labels == expected_labels
    for label, row in zip(part_labels, part_attrs):
        if label.endswith("_attn_out"):
            l = int(label.split("_")[0])
            want = sum(comp[f"blocks.{l}.attn.head.{h}"] for h in range(H)) + comp.get(f"blocks.{l}.attn.bias", 0)
        elif label.endswith("_mlp_out"):
            want = comp[f"blocks.{label.split('_')[0]}.mlp"]
        else:
            want = comp[label]
        np.testing.assert_allclose(row[0], want, rtol=0, atol=1e-6)

    # The heads with the other pieces are the final residual (before the norm).
    heads = cache.stack_head_results()
    params = run.parameters()
    total = cache["embed"] + cache["pos_embed"] + heads.sum(axis=0)
    for l in range(L):
        if f"blocks.{l}.attn.wo.bias" in params:
            total = total + params[f"blocks.{l}.attn.wo.bias"]
        if mlp:
            total = total + cache[f"blocks.{l}.mlp.out"]
    np.testing.assert_allclose(total, cache[f"blocks.{L - 1}.resid_post"], rtol=0, atol=1e-5)
    with_rest, rest_labels = cache.stack_head_results(incl_remainder=True, return_labels=True)
    assert rest_labels[-1] == "remainder"
    np.testing.assert_allclose(with_rest.sum(axis=0), cache[f"blocks.{L - 1}.resid_post"], rtol=0, atol=1e-5)

    # pos_slice picks positions after the library call: an int drops the axis.
    last = cache.accumulated_resid(apply_ln=True, pos_slice=-1)
    np.testing.assert_allclose(last, stack[:, :, -1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(cache.apply_ln_to_stack(cache.accumulated_resid(pos_slice=-1), pos_slice=-1),
                               last, rtol=0, atol=1e-12)
    return cache


def test_cache_helpers_equal_the_lens_on_the_induction_run(run):
    check_against_lens(run, INDUCTION_INPUT, "9", "3")


def test_cache_helpers_equal_the_lens_on_a_model_with_mlps(modadd_dir):
    with attograd.load_run(modadd_dir) as r:
        assert not r.config["model"]["attention_only"]
        vocab = r.vocab
        tokens = " ".join(vocab[i] for i in (3, 5))
        cache = check_against_lens(r, tokens, vocab[8], vocab[2])
        # mlp_input: the residual the MLP of block 0 reads, through ln2.
        stack, labels = cache.accumulated_resid(layer=0, mlp_input=True, return_labels=True)
        assert labels == ["0_pre", "0_mid"]


def test_new_points_add_up(run):
    ids = run.to_tokens(INPUT := INDUCTION_INPUT)
    plain = run.run_with_cache(ids, names=["embed"])[0]  # the reference forward without attn.result
    logits, cache = run.run_with_cache(ids, names=lambda n: n in ("embed", "pos_embed", "blocks.0.resid_pre")
                                       or n.startswith("blocks.1.attn."))
    np.testing.assert_array_equal(logits, plain)  # reading attn.result changes no bit
    np.testing.assert_array_equal(cache["embed"] + cache["pos_embed"], cache["blocks.0.resid_pre"])
    result = cache["blocks.1.attn.result"]
    assert result.shape == (1, len(ids[0]), 4, 32)
    np.testing.assert_allclose(result.sum(axis=2) + run.parameters()["blocks.1.attn.wo.bias"],
                               cache["blocks.1.attn.out"], rtol=0, atol=1e-5)
    assert "blocks.0.attn.result" not in run.hook_points()
    # Zeroing one head's result is zeroing its z.
    def zero_result(value, hook):
        v = value.copy()
        v[:, :, 2] = 0
        return v

    def zero_z(value, hook):
        v = value.copy()
        v[:, :, 2] = 0
        return v
    a = run.forward(ids, hooks={"blocks.1.attn.result": zero_result})
    b = run.forward(ids, hooks={"blocks.1.attn.z": zero_z})
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    assert np.abs(a - plain).max() > 1e-4


def test_cache_helper_errors_are_one_line(run):
    ids = run.to_tokens(INDUCTION_INPUT)
    _, cache = run.run_with_cache(ids, names=["blocks.0.resid_pre"])
    with pytest.raises(KeyError, match="blocks.1.resid_pre: not in the cache"):
        cache.accumulated_resid()
    _, cache = run.run_with_cache(ids)
    with pytest.raises(ValueError, match=r"^layer: expected 0..2, -1 or None \(every block and the final residual\), got 5$"):
        cache.accumulated_resid(layer=5)
    with pytest.raises(TypeError, match="^layer: expected an int"):
        cache.decompose_resid(layer="x")
    with pytest.raises(ValueError, match='^mode: expected "all", "attn" or "mlp", got "heads"$'):
        cache.decompose_resid(mode="heads")
    with pytest.raises(ValueError, match="^tokens: unknown token 'zz'$"):
        cache.logit_attrs(cache.accumulated_resid(), "zz")
    with pytest.raises(ValueError, match=r"^residual_stack: expected shape \(\.\.\., 32\), got \[2, 3\]$"):
        cache.logit_attrs(np.zeros((2, 3)), "9")
    with pytest.raises(ValueError, match=r"^residual_stack: shape \[2, 1, 3, 32\] does not match ln_f.scale"):
        cache.apply_ln_to_stack(np.zeros((2, 1, 3, 32)))
    with pytest.raises(TypeError, match="^pos_slice: expected"):
        cache.accumulated_resid(pos_slice="last")


def test_cache_helper_argument_types_are_one_line_errors(run):
    _, cache = run.run_with_cache(run.to_tokens(INDUCTION_INPUT))
    cases = [
        (lambda: cache.accumulated_resid(incl_mid="x"), TypeError, "^incl_mid: expected True or False, got str$"),
        (lambda: cache.decompose_resid(mode=3), TypeError, '^mode: expected "all", "attn" or "mlp", got int$'),
        (lambda: cache.logit_attrs("abc", "9"), TypeError, "^residual_stack: expected an array of floats, got str$"),
        (lambda: cache.apply_ln_to_stack(np.zeros((2, 1, 7, 32)), mlp_input=1), TypeError,
         "^mlp_input: expected True or False, got int$"),
        (lambda: cache.accumulated_resid(pos_slice=99), IndexError, "^pos_slice: index 99 is out of bounds"),
        (lambda: cache.accumulated_resid(layer=2**70), ValueError, "^layer: 1180591620717411303424 is out of range"),
        (lambda: cache.logit_attrs(np.zeros((2, 32)), 1.5), ValueError, "^tokens: expected a token name or id$"),
    ]
    for call, kind, pattern in cases:
        with pytest.raises(kind, match=pattern):
            call()
