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
    with pytest.raises(ValueError, match="cross_entropy"):
        ag.cross_entropy(a, [0, 5])
    with pytest.raises(ValueError, match=r"values: expected a float32 array of shape \(2, 3\), got float64"):
        a.assign(np.ones((2, 3)))
