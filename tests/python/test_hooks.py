# Hooks and the cache as TransformerLens users write them: run_with_cache with a names filter (a name, a
# list, a function) and hooks, hooks as a dict or a list of (name or filter, fn) pairs, the HookPoint a hook
# gets, forward's return_type and loss_per_token against the next-token loss computed in numpy, and the
# tokens (to_tokens, to_str_tokens, token_names, vocab) with the BOS rule.
import numpy as np
import pytest

import attograd

INPUT = "BOS 3 1 4 1 5 9 2 6 3 1 4"


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def next_token_loss(logits, ids):
    """(B, T - 1): -log p(ids[:, t + 1] | ids[:, :t + 1]), in float64."""
    lp = log_softmax(logits)[:, :-1]
    return -np.take_along_axis(lp, ids[:, 1:, None].astype(np.int64), axis=-1)[..., 0]


def test_names_filter_as_a_name_a_list_and_a_function(run):
    ids = run.to_tokens(INPUT)
    _, every = run.run_with_cache(ids)
    _, by_fn = run.run_with_cache(ids, names=lambda name: name.endswith("attn.pattern"))
    assert list(by_fn) == [p for p in run.hook_points() if p.endswith("attn.pattern")] and len(by_fn) == 2
    for name, value in by_fn.items():
        np.testing.assert_array_equal(value, every[name])
    _, by_list = run.run_with_cache(ids, names=("blocks.0.attn.z", "logits"))
    assert list(by_list) == ["blocks.0.attn.z", "logits"]
    _, by_name = run.run_with_cache(ids, names="blocks.1.resid_post")
    assert list(by_name) == ["blocks.1.resid_post"]
    _, none = run.run_with_cache(ids, names=lambda name: False)
    assert none == {}


def test_hooks_as_a_list_of_pairs_with_filters(run):
    ids = run.to_tokens(INPUT)
    seen = []

    def record(value, hook):
        assert isinstance(hook, attograd.HookPoint) and isinstance(hook, str) and hook.name == hook
        seen.append(hook.name)

    def zero_head_1(z, hook):
        z = z.copy()
        z[:, :, 1] = 0
        return z

    by_list = run.forward(ids, hooks=[("blocks.0.attn.z", zero_head_1),
                                      (lambda n: n.endswith("resid_pre"), record)])
    by_dict = run.forward(ids, hooks={"blocks.0.attn.z": zero_head_1})
    np.testing.assert_array_equal(by_list, by_dict)
    assert seen == ["blocks.0.resid_pre", "blocks.1.resid_pre"]
    assert not np.allclose(by_dict, run.forward(ids), atol=1e-4)
    # Two hooks at one point run in the order given: the second sees the first's output.
    seen_z = []
    run.forward(ids, hooks=[("blocks.0.attn.z", zero_head_1),
                            ("blocks.0.attn.z", lambda z, h: seen_z.append(z.copy()))])
    assert np.all(seen_z[0][:, :, 1] == 0)


def test_run_with_cache_with_hooks_caches_what_flows_on(run):
    ids = run.to_tokens(INPUT)

    def halve(v, hook):
        return v * np.float32(0.5)

    logits, cache = run.run_with_cache(ids, names=["blocks.0.resid_pre", "blocks.0.attn.pattern"],
                                       hooks=[("blocks.0.resid_pre", halve)])
    _, plain = run.run_with_cache(ids, names=["blocks.0.resid_pre"])
    np.testing.assert_array_equal(cache["blocks.0.resid_pre"], plain["blocks.0.resid_pre"] * np.float32(0.5))
    np.testing.assert_allclose(logits, run.forward(ids, hooks={"blocks.0.resid_pre": halve}), atol=0)


def test_return_type_and_loss_per_token(run):
    a, b = run.to_tokens(INPUT), run.to_tokens("BOS 5 9 3 7 12 4 5 9 3 7 12")
    ids = np.concatenate([a, b])
    logits = run.forward(ids)
    want = next_token_loss(logits, ids)
    loss = run.forward(ids, return_type="loss")
    assert isinstance(loss, float)
    np.testing.assert_allclose(loss, want.mean(), rtol=1e-5)
    per = run.forward(ids, return_type="loss", loss_per_token=True)
    assert per.shape == (2, 11) and per.dtype == np.float32
    np.testing.assert_allclose(per, want, rtol=1e-5, atol=1e-6)
    both_logits, both_loss = run.forward(ids, return_type="both")
    np.testing.assert_array_equal(both_logits, logits)
    assert both_loss == loss
    assert run.forward(ids, return_type=None) is None
    np.testing.assert_array_equal(run.forward(ids, return_type="logits"), logits)
    # With hooks, and from run_with_cache: the loss of the hooked forward.
    hooked, cache = run.run_with_cache(ids, names=["logits"], return_type="loss",
                                       hooks={"blocks.1.attn.z": lambda z, h: np.zeros_like(z)})
    np.testing.assert_allclose(hooked, next_token_loss(cache["logits"], ids).mean(), rtol=1e-5)
    assert abs(hooked - loss) > 1e-4


def test_hook_argument_errors_are_one_line(run):
    ids = run.to_tokens(INPUT)
    cases = [
        (dict(hooks=[lambda v, h: None]), ValueError, r"hooks\[0\]: expected a pair \(point name or filter, fn\)"),
        (dict(hooks=[("logits", 3)]), ValueError, r"hooks\[logits\]: expected a function"),
        (dict(hooks=[(3, lambda v, h: None)]), TypeError, r"hooks\[0\]: expected None, a point name"),
        (dict(hooks=[(["logits", 4], lambda v, h: None)]), TypeError,
         r"hooks\[0\]\[1\]: expected a point name \(str\), got int"),
        (dict(hooks="logits"), ValueError, "hooks: expected a dict"),
        (dict(hooks=[("nope", lambda v, h: None)]), ValueError, "hook nope: no such point"),
        (dict(return_type="probs"), ValueError, "return_type: expected \"logits\", \"loss\", \"both\" or None, "
                                                "got 'probs'"),
        (dict(return_type=1), TypeError, "return_type: expected"),
        (dict(loss_per_token="yes"), TypeError, r"forward\(\): expected arguments \(ids: .*got \(ndarray, "
                                                r"loss_per_token=str\)"),
    ]
    for kwargs, kind, message in cases:
        with pytest.raises(kind, match=message) as e:
            run.forward(ids, **kwargs)
        assert "\n" not in str(e.value), str(e.value)
    for names, kind, message in [(3, TypeError, "names: expected None, a point name"),
                                 ([1], TypeError, r"names\[0\]: expected a point name"),
                                 (["nope"], ValueError, "nope")]:
        with pytest.raises(kind, match=message) as e:
            run.run_with_cache(ids, names=names)
        assert "\n" not in str(e.value)

    def bad_filter(name):
        raise KeyError("from the filter")

    with pytest.raises(KeyError, match="from the filter"):
        run.run_with_cache(ids, names=bad_filter)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        run.forward([0], return_type="loss")


def test_tokens_and_the_bos_rule(run):
    vocab = run.vocab
    assert len(vocab) == run.config["model"]["vocab"] and vocab[0] == "BOS"
    # Any id of the vocabulary, whatever max_len: names only.
    every = np.arange(len(vocab))
    assert run.token_names(every) == vocab
    assert run.token_names(3) == vocab[3]
    grid = every[:6].reshape(2, 3)
    assert run.token_names(grid) == [vocab[:3], vocab[3:6]]
    with pytest.raises(ValueError, match="ids: token id 99 at index 0 is outside the vocabulary"):
        run.token_names(99)
    # to_tokens: (1, T), BOS put in front when missing, never doubled; prepend_bos=False takes text as given.
    with_bos = run.to_tokens("3 1 4")
    assert with_bos.shape == (1, 4) and with_bos.dtype == np.int32
    assert run.token_names(with_bos) == [["BOS", "3", "1", "4"]]
    np.testing.assert_array_equal(run.to_tokens("BOS 3 1 4"), with_bos)
    np.testing.assert_array_equal(run.to_tokens("3 1 4", prepend_bos=False), with_bos[:, 1:])
    np.testing.assert_array_equal(run.to_tokens(INPUT)[0], run.tokens(INPUT))
    batch = run.to_tokens(["3 1 4", "BOS 5 9 2"])
    assert batch.shape == (2, 4) and list(batch[:, 0]) == [0, 0]
    with pytest.raises(ValueError, match=r"text\[1\]: 3 tokens, but text\[0\] has 4"):
        run.to_tokens(["3 1 4", "5 9"])
    with pytest.raises(TypeError, match=r"text\[1\]: expected token names \(str\), got int"):
        run.to_tokens(["3", 4])
    with pytest.raises(ValueError, match="text: unknown token"):
        run.to_tokens("3 frog")
    # to_str_tokens: of text by the same rule, of ids as given.
    assert run.to_str_tokens("3 1 4") == ["BOS", "3", "1", "4"]
    assert run.to_str_tokens("3 1 4", prepend_bos=False) == ["3", "1", "4"]
    assert run.to_str_tokens(["3 1", "5 9"]) == [["BOS", "3", "1"], ["BOS", "5", "9"]]
    assert run.to_str_tokens(with_bos[0]) == ["BOS", "3", "1", "4"]
    assert run.to_str_tokens(with_bos) == [["BOS", "3", "1", "4"]]
