# The engine from Python: tensors to and from numpy, ops and backward against numpy's own numbers, the
# float64 gradient check, and XOR learned by a two-layer MLP (examples/mlp_xor in Python).
import numpy as np
import pytest

import attograd as ag


def test_numpy_round_trip_and_dtypes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ag.tensor(a)
    assert isinstance(t, ag.Tensor) and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a)
    assert isinstance(ag.tensor(a.astype(np.float64)), ag.Tensor64)
    a[0, 0] = 100  # the tensor holds a copy
    assert t.numpy()[0, 0] == 0


def test_backward_matches_the_analytic_gradient():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    tx, tw = ag.Tensor64(x, requires_grad=True), ag.Tensor64(w, requires_grad=True)
    loss = ag.sum(ag.tanh(tx @ tw))
    loss.backward()
    g = 1 - np.tanh(x @ w) ** 2  # d sum(tanh(xw)) / d(xw)
    np.testing.assert_allclose(loss.item(), np.tanh(x @ w).sum(), rtol=1e-12)
    np.testing.assert_allclose(tw.grad, x.T @ g, rtol=1e-10)
    np.testing.assert_allclose(tx.grad, g @ w.T, rtol=1e-10)


def test_gradcheck_float64():
    rng = np.random.default_rng(1)
    inputs = [ag.Tensor64(rng.standard_normal((3, 4))), ag.Tensor64(rng.standard_normal((4, 5)))]
    r = ag.gradcheck(lambda t: ag.softmax(ag.matmul(t[0], t[1])), inputs)
    assert r["worst"] < 1e-6 and len(r["per_input"]) == 2
    # A function whose backward disagrees with its values: f(x) = x * stop(x), seen as x^2 by differences.
    bad = ag.gradcheck(lambda t: t[0] * t[0].detach(), [ag.Tensor64(rng.standard_normal((3,)) + 2)])
    assert bad["worst"] > 0.1


def test_xor_with_a_two_layer_mlp():
    rng = np.random.default_rng(42)
    x = ag.tensor(np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32))
    y = np.array([0, 1, 1, 0])
    params = [ag.Tensor(rng.normal(0, 0.7, (2, 8)).astype(np.float32), requires_grad=True),
              ag.Tensor(np.zeros((8,), np.float32), requires_grad=True),
              ag.Tensor(rng.normal(0, 0.7, (8, 2)).astype(np.float32), requires_grad=True),
              ag.Tensor(np.zeros((2,), np.float32), requires_grad=True)]
    w1, b1, w2, b2 = params
    for step in range(300):
        for p in params:
            p.zero_grad()
        logits = ag.tanh(x @ w1 + b1) @ w2 + b2
        loss = ag.cross_entropy(logits, y)
        loss.backward()
        for p in params:
            p.assign(p.numpy() - 0.5 * p.grad)
    assert loss.item() < 0.05
    assert list(np.argmax(logits.numpy(), axis=1)) == [0, 1, 1, 0]


def test_op_errors_are_value_errors():
    a = ag.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"matmul.*inner dims"):
        a @ a
    with pytest.raises(ValueError, match="backward: needs a one-element tensor"):
        ag.tanh(a).backward()
    with pytest.raises(ValueError, match=r"targets: class id 5 at index 1 is outside 0..2"):
        ag.cross_entropy(a, [0, 5])
    with pytest.raises(ValueError, match=r"values: expected a float32 array of shape \(2, 3\), got float64"):
        a.assign(np.ones((2, 3)))


# ---- The engine for a model of one's own: scalars, powers, indexing, cat, permute, reductions, retain_grad.
# Each op's values against numpy, each gradient against float64 central differences of the same function.

def numeric_grad(f, x, eps=1e-6):
    """d sum(f(x) * w) / dx by central differences, f a numpy function of a float64 array."""
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_op(op, ref, x, weights_seed=0):
    """op on a Tensor64 and ref on an array give the same values, and the gradient of a weighted sum of the
    output equals float64 finite differences of ref."""
    t = ag.Tensor64(x, requires_grad=True)
    y = op(t)
    want = ref(x)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12, atol=1e-14)
    w = np.random.default_rng(weights_seed).standard_normal(np.shape(want))
    ag.sum(y * ag.Tensor64(w)).backward()
    np.testing.assert_allclose(t.grad, numeric_grad(lambda v: float((ref(v) * w).sum()), x),
                               rtol=1e-6, atol=1e-8)


POSITIVE = np.random.default_rng(3).uniform(0.5, 2.0, (3, 4))
SIGNED = np.random.default_rng(4).standard_normal((2, 3, 4))


@pytest.mark.parametrize("name,op,ref,x", [
    ("t + s", lambda t: t + 1e-5, lambda x: x + 1e-5, SIGNED),
    ("s + t", lambda t: 2 + t, lambda x: 2 + x, SIGNED),
    ("t - s", lambda t: t - 1.5, lambda x: x - 1.5, SIGNED),
    ("s - t", lambda t: 1.5 - t, lambda x: 1.5 - x, SIGNED),
    ("t * s", lambda t: t * 3, lambda x: x * 3, SIGNED),
    ("s * t", lambda t: -0.5 * t, lambda x: -0.5 * x, SIGNED),
    ("t / s", lambda t: t / 2.0, lambda x: x / 2.0, SIGNED),
    ("s / t", lambda t: 3.0 / t, lambda x: 3.0 / x, POSITIVE),
    ("t ** 2", lambda t: t ** 2, lambda x: x ** 2, SIGNED),
    ("t ** 3", lambda t: t ** 3, lambda x: x ** 3, SIGNED),
    ("t ** -0.5", lambda t: t ** -0.5, lambda x: x ** -0.5, POSITIVE),
    ("2 ** t", lambda t: 2.0 ** t, lambda x: 2.0 ** x, SIGNED),
    ("sqrt", lambda t: t.sqrt(), np.sqrt, POSITIVE),
    ("ag.sqrt", ag.sqrt, np.sqrt, POSITIVE),
    ("exp", lambda t: t.exp(), np.exp, SIGNED),
    ("log", lambda t: ag.log(t), np.log, POSITIVE),
    ("pow", lambda t: ag.pow(t, 1.5), lambda x: x ** 1.5, POSITIVE),
    ("index int", lambda t: t[1], lambda x: x[1], SIGNED),
    ("index negative", lambda t: t[-1, 2], lambda x: x[-1, 2], SIGNED),
    ("slice", lambda t: t[:, 1:, ::2], lambda x: x[:, 1:, ::2], SIGNED),
    ("slice reversed", lambda t: t[..., ::-1], lambda x: x[..., ::-1], SIGNED),
    ("None axis", lambda t: t[:, None, 0], lambda x: x[:, None, 0], SIGNED),
    ("int array, repeated", lambda t: t[:, [0, 2, 0]], lambda x: x[:, [0, 2, 0]], SIGNED),
    ("bool mask", lambda t: t[SIGNED > 0], lambda x: x[SIGNED > 0], SIGNED),
    ("element", lambda t: t[0, 1, 2], lambda x: x[0, 1, 2], SIGNED),
    ("permute", lambda t: t.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), SIGNED),
    ("permute list", lambda t: ag.permute(t, [1, 2, 0]), lambda x: x.transpose(1, 2, 0), SIGNED),
    ("transpose axes", lambda t: t.transpose((0, 2, 1)), lambda x: x.transpose(0, 2, 1), SIGNED),
    ("transpose last two", lambda t: ag.transpose(t), lambda x: np.swapaxes(x, -1, -2), SIGNED),
    ("sum axes", lambda t: ag.sum(t, dim=(0, 2)), lambda x: x.sum(axis=(0, 2)), SIGNED),
    ("sum negative axis keepdim", lambda t: t.sum(dim=-1, keepdim=True), lambda x: x.sum(-1, keepdims=True),
     SIGNED),
    ("sum all keepdim", lambda t: t.sum(keepdim=True), lambda x: x.sum(keepdims=True), SIGNED),
    ("mean axes", lambda t: t.mean(dim=[1, 2]), lambda x: x.mean(axis=(1, 2)), SIGNED),
    ("mean all", lambda t: ag.mean(t), lambda x: x.mean(), SIGNED),
])
def test_op_against_numpy_and_finite_differences(name, op, ref, x):
    check_op(op, ref, x)


def test_cat_against_numpy_and_finite_differences():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    for dim, (x, y) in [(1, (a, b)), (0, (a, a * 2)), (-1, (a, b))]:
        ta, tb = ag.Tensor64(x, requires_grad=True), ag.Tensor64(y, requires_grad=True)
        out = ag.cat([ta, tb], dim=dim)
        np.testing.assert_array_equal(out.numpy(), np.concatenate([x, y], axis=dim))
        w = rng.standard_normal(out.shape)
        ag.sum(out * ag.Tensor64(w)).backward()
        gx = numeric_grad(lambda v: float((np.concatenate([v, y], axis=dim) * w).sum()), x)
        gy = numeric_grad(lambda v: float((np.concatenate([x, v], axis=dim) * w).sum()), y)
        np.testing.assert_allclose(ta.grad, gx, rtol=1e-6)
        np.testing.assert_allclose(tb.grad, gy, rtol=1e-6)
    assert isinstance(ag.cat((ag.tensor(np.ones(2, np.float32)),)), ag.Tensor)


def test_float32_scalars_keep_float32():
    t = ag.Tensor(np.array([1.0, 2.0, 4.0], np.float32), requires_grad=True)
    y = (1 + t) / 2 - 0.25 * t ** 2
    assert isinstance(y, ag.Tensor) and y.numpy().dtype == np.float32
    np.testing.assert_allclose(y.numpy(), (1 + t.numpy()) / 2 - 0.25 * t.numpy() ** 2, rtol=1e-6)
    z = np.float32(2) * t  # numpy's scalar steps aside for the Tensor's own operator
    assert isinstance(z, ag.Tensor)
    np.testing.assert_array_equal(z.numpy(), [2, 4, 8])


def test_retain_grad_keeps_a_non_leaf_gradient():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    tx, tw = ag.Tensor64(x, requires_grad=True), ag.Tensor64(w, requires_grad=True)
    h = tx @ tw
    h.retain_grad()
    other = ag.tanh(h)
    loss = ag.sum(other ** 2)
    loss.backward()
    # d loss / d h = 2 tanh(h) (1 - tanh(h)^2)
    t = np.tanh(x @ w)
    np.testing.assert_allclose(h.grad, 2 * t * (1 - t ** 2), rtol=1e-12)
    assert other.grad is None  # not retained
    np.testing.assert_allclose(tw.grad, x.T @ (2 * t * (1 - t ** 2)), rtol=1e-12)


def test_a_model_of_ones_own_with_attention_written_by_hand():
    # One attention head from the ops above (slicing the heads out of one projection, permute, a causal
    # mask by indexing, softmax, cat), its gradient checked by float64 finite differences.
    rng = np.random.default_rng(7)
    T, D = 4, 6
    mask = np.triu(np.full((T, T), -1e9), 1)

    def f(tensors):
        x, wqkv = tensors
        qkv = x @ wqkv                      # (T, 3D)
        q, k, v = qkv[:, :D], qkv[:, D:2 * D], qkv[:, 2 * D:]
        scores = q @ k.permute(1, 0) / np.sqrt(D) + ag.Tensor64(mask)
        out = ag.softmax(scores) @ v
        return ag.cat([out[:, :3], out[:, 3:] * 2.0], dim=1).mean(dim=0)

    inputs = [ag.Tensor64(rng.standard_normal((T, D))), ag.Tensor64(rng.standard_normal((D, 3 * D)) * 0.3)]
    assert ag.gradcheck(f, inputs)["worst"] < 1e-6


def test_engine_argument_errors_are_one_line():
    t = ag.Tensor(np.ones((2, 3), np.float32))
    cases = [
        (lambda: t + "x", TypeError, "unsupported operand"),
        (lambda: t ** t, TypeError, "unsupported operand"),
        (lambda: (-2.0) ** t, ValueError, "expected a positive base"),
        (lambda: t[5], IndexError, "out of bounds"),
        (lambda: t[ag.Tensor(np.zeros(1, np.float32))], TypeError, "index: expected ints"),
        (lambda: t.sum(dim=3), ValueError, "dim: dim 3 is out of range for 2 dims"),
        (lambda: t.sum(dim=(0, 0)), ValueError, "dim: a dim is given twice"),
        (lambda: t.mean(dim="a"), TypeError, "dim: expected an int or a sequence of ints, got str"),
        (lambda: t.permute(0, 0), ValueError, "permute: order is not a permutation"),
        (lambda: t.permute("ab"), TypeError, "axes: expected a sequence of ints"),
        (lambda: ag.cat([t, ag.Tensor64(np.ones((2, 3)))]), TypeError,
         r"tensors\[1\]: expected a Tensor like tensors\[0\], got Tensor64"),
        (lambda: ag.cat([]), ValueError, "tensors: expected at least one tensor, got none"),
        (lambda: ag.cat(t), TypeError, "tensors: expected a list of tensors, got Tensor"),
        (lambda: ag.cat([t, ag.Tensor(np.ones((3, 3), np.float32))], dim=1), ValueError, "concat"),
        (lambda: len(ag.sum(t)), TypeError, "len"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message) as e:
            call()
        assert "\n" not in str(e.value), str(e.value)
