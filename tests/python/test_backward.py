# Run.backward: the gradient at every hook point of sum(grad_logits * logits) against central finite
# differences, and attribution patching rebuilt in Python from it against run.patch(attribution=True).
import numpy as np
import pytest

CLEAN, CORRUPT = "BOS 5 9 3 7 12 5", "BOS 5 9 3 7 12 8"


def test_backward_matches_finite_differences_at_every_point(run):
    rng = np.random.default_rng(3)
    ids = np.stack([run.to_tokens(CLEAN)[0], run.to_tokens(CORRUPT)[0]])  # a batch of 2
    V = len(run.vocab)
    weights = rng.standard_normal((2, ids.shape[1], V)).astype(np.float32)
    points = run.hook_points() + ["blocks.1.attn.result"]
    grads = run.backward(ids, weights, points=points)
    assert list(grads) == points
    _, cache = run.run_with_cache(ids, names=points)

    def metric(point, delta):
        logits = run.forward(ids, hooks={point: lambda value, hook: value + delta})
        return float(np.sum(weights.astype(np.float64) * logits))

    # The Run's model is float32, so the check is float32 central differences of a directional derivative
    # along a random unit-variance direction. With eps 1e-3 the truncation error (eps^2 f''' / 6) is below
    # 1e-3 (it is ~0.06 at eps 1e-2 on pos_embed), and the rounding error of f, a sum of B T V = 462
    # float32 logits times weights ~1 (~1e-5 after the forward's own rounding), divided by 2 eps is
    # ~5e-3; 1e-2 absolute plus 0.1% of the value bounds both (measured: 2e-3 at most), while a wrong
    # gradient (another point's, a missing term) is off by O(1). The engine's own gradient at every point
    # is checked in float64 by tests/nn/test_hooks.cpp through the same Hooks::grad; this checks that
    # Run.backward carries it out whole.
    eps = 1e-3
    for point in points:
        g = grads[point]
        assert g.shape == cache[point].shape and g.dtype == np.float32, point
        direction = rng.standard_normal(g.shape).astype(np.float32)
        numeric = (metric(point, eps * direction) - metric(point, -eps * direction)) / (2 * eps)
        analytic = float(np.sum(g.astype(np.float64) * direction))
        assert abs(numeric - analytic) <= 1e-2 + 1e-3 * abs(analytic), (point, numeric, analytic)
    # Not all zero: the logits' own gradient is grad_logits.
    np.testing.assert_array_equal(grads["logits"], weights)


def test_attribution_patching_from_backward_equals_the_tool(run):
    clean, corrupt = run.to_tokens(CLEAN), run.to_tokens(CORRUPT)
    answer, wrong = run.vocab.index("9"), run.vocab.index("3")
    L, H, T = run.config["model"]["n_layers"], run.config["model"]["n_heads"], clean.shape[1]
    resid = [f"blocks.{l}.resid_pre" for l in range(L)] + [f"blocks.{L - 1}.resid_post"]
    z = [f"blocks.{l}.attn.z" for l in range(L)]
    pattern = [f"blocks.{l}.attn.pattern" for l in range(L)]
    clean_logits, clean_cache = run.run_with_cache(clean)
    corrupt_logits, corrupt_cache = run.run_with_cache(corrupt)
    diff = lambda logits: float(logits[0, -1, answer]) - float(logits[0, -1, wrong])
    scale = 1 / (diff(clean_logits) - diff(corrupt_logits))
    seed = np.zeros(corrupt_logits.shape, np.float32)
    seed[0, -1, answer], seed[0, -1, wrong] = 1, -1
    grads = run.backward(corrupt, seed, points=resid + z + pattern)
    term = lambda p: ((clean_cache[p].astype(np.float64) - corrupt_cache[p]) * grads[p]) * scale

    tool = run.patch(CLEAN, CORRUPT, answer="9", wrong="3", attribution=True)["attribution"]
    ours = {(l, t): term(p)[0, t].sum() for l, p in enumerate(resid) for t in range(T)}
    for row in tool["resid_pre"]:
        assert ours[(row["layer"], row["position"])] == pytest.approx(row["recovered"], abs=1e-6)
    assert len(tool["resid_pre"]) == len(ours)
    ours = {(l, h, t): term(p)[0, t, h].sum() for l, p in enumerate(z) for h in range(H) for t in range(T)}
    for row in tool["head_z"]:
        assert ours[(row["layer"], row["head"], row["position"])] == pytest.approx(row["recovered"], abs=1e-6)
    ours = {(l, h): term(p)[0, h].sum() for l, p in enumerate(pattern) for h in range(H)}
    for row in tool["head_pattern"]:
        assert ours[(row["layer"], row["head"])] == pytest.approx(row["recovered"], abs=1e-6)


def test_backward_errors_are_one_line(run):
    ids = run.to_tokens(CLEAN)
    with pytest.raises(ValueError, match=r"^grad_logits: expected a float32 array of shape \(1, 7, 33\)"):
        run.backward(ids, np.zeros((1, 7, 3), np.float32))
    with pytest.raises(ValueError, match="^hook blocks.9.resid_pre: no such point"):
        run.backward(ids, np.zeros((1, 7, 33), np.float32), points=["blocks.9.resid_pre"])
    with pytest.raises(TypeError, match=r"^points\[0\]: expected a point name"):
        run.backward(ids, np.zeros((1, 7, 33), np.float32), points=[3])


def test_bwd_hooks_match_float64_finite_differences_at_every_point(run):
    """Backward hooks (TransformerLens's bwd_hooks) on the loss, in float64: each hook's gradient against
    central differences of the float64 loss with the point's value moved by a forward hook."""
    ids = np.stack([run.to_tokens(CLEAN)[0], run.to_tokens(CORRUPT)[0]])
    points = run.hook_points() + ["blocks.1.attn.result"]
    seen, order = {}, []

    def keep(grad, hook):
        assert not grad.flags.writeable
        seen[hook.name] = grad.copy()
        order.append(hook.name)

    loss = run.forward(ids, return_type="loss", dtype="float64", bwd_hooks=[(p, keep) for p in points])
    assert isinstance(loss, float)
    assert sorted(seen) == sorted(points)
    # Called in backward order: the logits' first, embed's last.
    assert order[0] == "logits" and order[-1] == "embed"
    # The same loss as float32's, to float32 rounding.
    assert loss == pytest.approx(run.forward(ids, return_type="loss"), rel=1e-5)
    rng = np.random.default_rng(4)
    # float64 throughout: truncation (eps^2 f''' / 6 ~ 1e-12 at eps 1e-6) and rounding (1e-16 / eps) both
    # far below 1e-7, while a wrong gradient is off by O(1e-2) or more.
    eps = 1e-6
    for point in points:
        g = seen[point]
        assert g.dtype == np.float64, point
        direction = rng.standard_normal(g.shape)
        f = lambda d: run.forward(ids, return_type="loss", dtype="float64",
                                  hooks={point: lambda value, hook: value + d})
        numeric = (f(eps * direction) - f(-eps * direction)) / (2 * eps)
        analytic = float(np.sum(g * direction))
        assert abs(numeric - analytic) <= 1e-7 + 1e-6 * abs(analytic), (point, numeric, analytic)


def test_bwd_hooks_with_grad_logits_equal_backward(run):
    ids = run.to_tokens(CLEAN)
    seed = np.random.default_rng(5).standard_normal((1, ids.shape[1], len(run.vocab))).astype(np.float32)
    got = {}
    logits = run.forward(ids, grad_logits=seed, bwd_hooks={"blocks.0.resid_mid": lambda g, h: got.update({h: g})})
    np.testing.assert_allclose(logits, run.forward(ids), rtol=1e-5, atol=1e-5)
    want = run.backward(ids, seed, points=["blocks.0.resid_mid"])["blocks.0.resid_mid"]
    np.testing.assert_array_equal(got["blocks.0.resid_mid"], want)
    # With a forward hook that zeroes a head, the gradient is that of the patched model.
    zero = lambda z, hook: np.zeros_like(z)
    patched = {}
    run.forward(ids, hooks={"blocks.0.attn.z": zero}, grad_logits=seed,
                bwd_hooks={"blocks.0.attn.z": lambda g, h: patched.update({h: g})})
    assert not np.array_equal(patched["blocks.0.attn.z"], run.backward(ids, seed, points="blocks.0.attn.z")["blocks.0.attn.z"])


def test_bwd_hooks_errors_are_one_line(run):
    ids = run.to_tokens(CLEAN)
    with pytest.raises(ValueError, match=r"^bwd_hooks: the backward starts from the loss"):
        run.forward(ids, bwd_hooks={"logits": lambda g, h: None})
    with pytest.raises(ValueError, match=r"^bwd_hooks\[logits\] returned a value"):
        run.forward(ids, return_type="loss", bwd_hooks={"logits": lambda g, h: g})
    with pytest.raises(ValueError, match=r"^grad_logits: the seed of a backward, given without bwd_hooks"):
        run.forward(ids, grad_logits=np.zeros((1, 7, 33), np.float32))
    with pytest.raises(ValueError, match=r"^dtype: expected \"float32\" or \"float64\", got 'float16'"):
        run.forward(ids, dtype="float16")
    with pytest.raises(TypeError, match=r"^dtype: expected"):
        run.forward(ids, dtype=3)
    with pytest.raises(ValueError, match=r"^bwd_hooks\[0\]: expected a pair"):
        run.forward(ids, return_type="loss", bwd_hooks=[3])
