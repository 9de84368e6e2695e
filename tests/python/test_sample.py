# Run.sample: the task's own sequences. The held-out side is attograd eval's set (the loss over its scored
# positions equals run.eval's), the same for the same seed; the training side draws from its seed.
import numpy as np
import pytest


def test_heldout_sample_is_the_eval_set(run):
    s = run.sample(64)
    assert s["ids"].shape == s["targets"].shape == s["scored"].shape == (64, run.config["task"]["length"] * 2)
    np.testing.assert_array_equal(s["scored"], s["targets"] >= 0)
    assert s["scored"].any() and not s["is_padding"].any()
    logits = run.forward(s["ids"])
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
        -1, keepdims=True)
    b, t = np.nonzero(s["scored"])
    loss = -logp[b, t, s["targets"][b, t]].astype(np.float64).mean()
    ev = run.eval(split="heldout", n=64)
    assert loss == pytest.approx(ev["eval_loss"], abs=1e-5)
    right = (logits.argmax(-1) == s["targets"]) | ~s["scored"]
    assert right.all(axis=1).mean() == pytest.approx(ev["eval_acc"], abs=1e-12)
    np.testing.assert_array_equal(run.sample(64, seed=run.config["seed"])["ids"], s["ids"])
    assert not np.array_equal(run.sample(64, seed=7)["ids"], s["ids"])


def test_train_sample_draws_from_its_seed(run):
    a, b = run.sample(8, split="train", seed=1), run.sample(8, split="train", seed=1)
    np.testing.assert_array_equal(a["ids"], b["ids"])
    assert not np.array_equal(a["ids"], run.sample(8, split="train", seed=2)["ids"])
    assert a["ids"][:, 0].tolist() == [0] * 8  # every sequence starts with BOS


def test_sample_errors_are_one_line(run):
    with pytest.raises(ValueError, match="^n: expected at least 1 sequence, got 0$"):
        run.sample(0)
    with pytest.raises(ValueError, match="^n: expected at most 2147483647 sequences, got 1099511627776$"):
        run.sample(2**40)
    with pytest.raises(ValueError, match="^split: expected \"heldout\" or \"train\", got 'test'$"):
        run.sample(4, split="test")
    with pytest.raises(ValueError, match="^seed: expected a non-negative int, got -1$"):
        run.sample(4, seed=-1)
    with pytest.raises(TypeError, match="^n: expected an int"):
        run.sample(1.5)
