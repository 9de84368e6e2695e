# Issue 58's TransformerLens habits on an imported GPT-2 (tests/fixtures/import/gpt2_bpe, 657 tokens) and
# on the project's own toy runs: GPT-2's vocab.json + merges.txt alone (gpt2_pair, written by
# tests/fixtures/make_gpt2_pair_fixture.py) as a pretrained run's tokenizer, BOS as TransformerLens prepends
# it, hook values written in place, arrays of other libraries, token strings as text, answers as text, and
# TransformerLens's names as aliases of attograd's.
import json
import os

import numpy as np
import pytest

import attograd
from conftest import SOURCE_DIR, cli, cli_json

FIXTURES = f"{SOURCE_DIR}/tests/fixtures"
EOT = 656  # <|endoftext|> in the fixture's tokenizer
TEXT = "The cat sat on the mat. The cat"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """The GPT-2 fixture imported with its tokenizer.json and, apart, with only vocab.json + merges.txt."""
    root = tmp_path_factory.mktemp("tl")
    out = {}
    for name in ("gpt2_bpe", "gpt2_pair"):
        out[name] = str(root / name)
        attograd.import_model(f"{FIXTURES}/import/{name}", out=out[name])
    return out


@pytest.fixture()
def run(gpt2):
    with attograd.load_run(gpt2["gpt2_bpe"]) as r:
        yield r


# --- 1. vocab.json + merges.txt alone


def test_the_pair_alone_is_a_pretrained_runs_tokenizer_with_the_same_ids(gpt2):
    assert not os.path.exists(f"{FIXTURES}/import/gpt2_pair/tokenizer.json")
    with open(os.path.join(gpt2["gpt2_pair"], "config.json")) as f:
        assert json.load(f)["task"] == {**json.load(open(os.path.join(gpt2["gpt2_bpe"], "config.json")))["task"],
                                        "tokenizer": "."}
    with open(f"{FIXTURES}/tokenizer/encodings.json", encoding="utf-8") as f:
        texts = [t["text"] for t in json.load(f)["texts"]]
    with attograd.load_run(gpt2["gpt2_pair"]) as pair, attograd.load_run(gpt2["gpt2_bpe"]) as bpe:
        assert pair.config["task"]["kind"] == "pretrained"
        compared = 0
        for text in texts:
            try:
                want = bpe.to_tokens(text)
            except ValueError:  # longer than the model's 64 positions
                continue
            np.testing.assert_array_equal(pair.to_tokens(text), want)
            compared += 1
        assert compared >= 8
        np.testing.assert_array_equal(pair.forward(pair.to_tokens(TEXT)), bpe.forward(bpe.to_tokens(TEXT)))
    # The command line: --prompt reads text, as with tokenizer.json.
    a = cli_json("forward", gpt2["gpt2_pair"], "--prompt", "Hello", "--json")
    b = cli_json("forward", gpt2["gpt2_bpe"], "--prompt", "Hello", "--json")
    assert a["ids"] == b["ids"] and a["tokens"] == b["tokens"] and len(a["ids"]) >= 1


def test_the_pair_alone_takes_a_text_at_import(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("Hello world. " * 200)
    out = str(tmp_path / "run")
    cli("import", f"{FIXTURES}/import/gpt2_pair", "--out", out, "--text", str(text))
    with open(os.path.join(out, "config.json")) as f:
        task = json.load(f)["task"]
    assert (task["kind"], task["unit"]) == ("text", "bpe")
    assert cli_json("eval", out, "--json")["n"] > 0


# --- 2. BOS as TransformerLens prepends it


def test_an_imported_gpt2_prepends_endoftext_unless_told_not_to(run, gpt2):
    ids = run.to_tokens(TEXT)[0].tolist()
    assert ids[0] == EOT and run.to_tokens(TEXT, prepend_bos=False)[0].tolist() == ids[1:]
    assert run.to_str_tokens(TEXT)[0] == "<|endoftext|>"
    g = run.generate(prompt=TEXT, max_new=2, temperature=0)
    assert g["ids"][:len(ids)] == ids
    g = run.generate(prompt=TEXT, max_new=2, temperature=0, prepend_bos=False)
    assert g["ids"][:len(ids) - 1] == ids[1:]
    # The command line: BOS by default, --no-bos to leave it out.
    assert cli_json("generate", gpt2["gpt2_bpe"], "--prompt", TEXT, "--max-new", "1", "--temperature", "0",
                    "--json")["ids"][0] == EOT
    assert cli_json("generate", gpt2["gpt2_bpe"], "--prompt", TEXT, "--max-new", "1", "--temperature", "0",
                    "--no-bos", "--json")["ids"][:len(ids) - 1] == ids[1:]


def test_a_toy_run_keeps_its_own_bos(induction_dir):
    with attograd.load_run(induction_dir) as toy:
        assert toy.to_str_tokens("3 1 4") == ["BOS", "3", "1", "4"]
        g = toy.generate("3 1 4", max_new=1, temperature=0)
        assert g["prompt"] == ["BOS", "3", "1", "4"]
        assert toy.generate(tokens="BOS 3 1 4", max_new=1, temperature=0)["ids"] == g["ids"]
        # Text to forward is to_tokens'd (TransformerLens's model("text")): the task's token names here.
        np.testing.assert_array_equal(toy("3 1 4"), toy.forward(toy.to_tokens("3 1 4")))


# --- 3. hooks write in place; arrays of other libraries; Tensor.__array__


class Wrapped:
    """An array of another library: only numpy's __array__ protocol."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def test_a_hook_writes_in_place_and_it_takes_effect(run):
    ids = run.to_tokens(TEXT)
    plain = run.forward(ids)

    def copy_and_return(z, hook):
        z = z.copy()
        z[:, :, 1] = 0
        return z

    def in_place(z, hook):
        assert z.flags.writeable
        z[:, :, 1] = 0

    want = run.forward(ids, hooks={"blocks.0.attn.z": copy_and_return})
    assert not np.allclose(want, plain, atol=1e-4)
    np.testing.assert_array_equal(run.forward(ids, hooks={"blocks.0.attn.z": in_place}), want)
    # What flows on is what the cache holds, and the model is untouched afterwards.
    _, cache = run.run_with_cache(ids, hooks={"blocks.0.attn.z": in_place})
    assert (cache["blocks.0.attn.z"][:, :, 1] == 0).all()
    np.testing.assert_array_equal(run.forward(ids), plain)
    # A hook that only reads leaves the forward as it was (the hooked forward is the reference one: 1e-5).
    np.testing.assert_allclose(run.forward(ids, hooks={"blocks.0.attn.z": lambda z, h: None}), plain, atol=1e-5)


class LikeTorch:
    """What attograd asks of a torch tensor: detach() and cpu() before numpy's __array__, which a tensor that
    requires grad refuses."""

    def __init__(self, a, attached=True):
        self.a, self.attached = a, attached

    def detach(self):
        return LikeTorch(self.a, False)

    def cpu(self):
        return self

    def numpy(self):
        return self.a

    def __array__(self, dtype=None, copy=None):
        if self.attached:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad")
        return self.a


def test_a_hook_may_return_any_array_like(run):
    ids = run.to_tokens(TEXT)

    def zeroed(z):
        z = np.array(z)
        z[:, :, 1] = 0
        return z

    want = run.forward(ids, hooks={"blocks.0.attn.z": lambda z, h: zeroed(z)})
    for make in (Wrapped, memoryview, LikeTorch):
        got = run.forward(ids, hooks={"blocks.0.attn.z": lambda z, h: make(zeroed(z))})
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"hooks\[blocks.0.attn.z\] returned: expected a float32 array"):
        run.forward(ids, hooks={"blocks.0.attn.z": lambda z, h: Wrapped(zeroed(z).astype(np.float64))})
    # Ids of another library too.
    np.testing.assert_array_equal(run.forward(Wrapped(ids)), run.forward(ids))
    np.testing.assert_array_equal(run.forward(LikeTorch(ids)), run.forward(ids))
    assert run.generate(LikeTorch(ids), max_new=1, temperature=0)["ids"][:ids.shape[1]] == ids[0].tolist()


def test_a_hook_may_return_a_torch_tensor(run):
    torch = pytest.importorskip("torch")
    ids = run.to_tokens(TEXT)

    def zero(z, hook):
        t = torch.tensor(np.array(z), requires_grad=True)
        return t * torch.tensor([1.0, 0.0, 1.0, 1.0])[:, None]

    want = run.forward(ids, hooks={"blocks.0.attn.z": lambda z, h: z * np.array([1, 0, 1, 1], np.float32)[:, None]})
    np.testing.assert_array_equal(run.forward(torch.tensor(ids), hooks={"blocks.0.attn.z": zero}), want)


def test_np_asarray_of_a_tensor_is_a_float_array():
    t = attograd.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.shape == (2, 2) and a.tolist() == [[1, 2], [3, 4]]
    assert np.array(t, dtype=np.float64).dtype == np.float64
    assert np.asarray(attograd.Tensor64(np.ones(3))).dtype == np.float64
    # And a Tensor is itself an array-like value: Tensor(Tensor) copies it.
    assert attograd.Tensor(t).numpy().tolist() == [[1, 2], [3, 4]]


# --- 4. token strings as text, answers as text


def test_token_strings_are_text(run):
    ids = run.to_tokens(TEXT, prepend_bos=False)
    strings = run.to_str_tokens(TEXT, prepend_bos=False)
    assert "".join(strings) == TEXT and any(s.startswith(" ") for s in strings)
    assert not any("\\s" in s for s in strings)
    assert run.token_names(ids[0]) == strings and run.to_string(ids[0]) == TEXT
    assert run.to_string(ids) == [TEXT]
    # A token that is half of a UTF-8 character shows U+FFFD, as Hugging Face's decode does.
    half = [i for i, name in enumerate(run.vocab) if name.startswith("\\x") and int(name[2:4], 16) >= 0x80][0]
    assert run.token_names(half) == "\ufffd"


def test_an_answer_may_be_text(run):
    names = run.patch(prompt=TEXT, corrupt={"prompt": TEXT.replace("cat", "dog")}, answer="\\sthe", wrong=".")
    text = run.patch(prompt=TEXT, corrupt={"prompt": TEXT.replace("cat", "dog")}, answer=" the", wrong=".")
    assert text == names
    assert run.to_single_token(" the") == run.vocab.index("\\sthe")
    with pytest.raises(ValueError, match=r"^answer: unknown token ' tthhee' \(as text it is \d+ tokens, .*; give one "
                                         r"token: its name or text, or its id\)$"):
        run.patch(prompt=TEXT, corrupt={"prompt": TEXT}, answer=" tthhee", wrong=".")
    # The cache's logit_attrs reads its tokens the same way.
    _, cache = run.run_with_cache(run.to_tokens(TEXT))
    stack = cache.accumulated_resid()
    np.testing.assert_array_equal(cache.logit_attrs(stack, " the"), cache.logit_attrs(stack, "\\sthe"))
    with pytest.raises(ValueError, match=r"is \d+ tokens .* not one"):
        run.to_single_token(" tthhee")


# --- 5. TransformerLens's names


def test_transformerlens_keywords_and_hook_names(run):
    ids = run.to_tokens(TEXT)
    logits, cache = run.run_with_cache(ids)
    np.testing.assert_array_equal(run(ids), run.forward(ids))
    np.testing.assert_array_equal(run(TEXT), run.forward(ids))
    np.testing.assert_array_equal(cache["blocks.0.attn.hook_pattern"], cache["blocks.0.attn.pattern"])
    np.testing.assert_array_equal(cache["pattern", 1], cache["blocks.1.attn.pattern"])
    np.testing.assert_array_equal(cache["resid_pre", 0], cache["blocks.0.resid_pre"])
    np.testing.assert_array_equal(cache["hook_embed"], cache["embed"])
    np.testing.assert_array_equal(cache["ln_final.hook_normalized"], cache["ln_f.out"])
    np.testing.assert_array_equal(cache["blocks.1.mlp.hook_pre"], cache["blocks.1.mlp.pre"])
    assert "blocks.0.hook_resid_post" in cache and ("z", 0) in cache
    # names_filter= and fwd_hooks=, in TransformerLens's names or attograd's.
    _, small = run.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(small) == ["blocks.0.attn.pattern", "blocks.1.attn.pattern"]
    _, small = run.run_with_cache(ids, names_filter=["blocks.0.hook_resid_pre"])
    assert list(small) == ["blocks.0.resid_pre"]

    def zero(z, hook):
        z[:, :, 1] = 0

    want = run.forward(ids, hooks={"blocks.0.attn.z": zero})
    for hooks in ([("blocks.0.attn.hook_z", zero)], [(lambda n: n == "blocks.0.attn.hook_z", zero)]):
        np.testing.assert_array_equal(run.run_with_hooks(ids, fwd_hooks=hooks), want)
    with pytest.raises(TypeError, match="both fwd_hooks and hooks"):
        run.forward(ids, fwd_hooks=[], hooks=[])


def test_cfg_has_transformerlens_fields(run):
    cfg = run.cfg
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_mlp, cfg.d_vocab, cfg.n_ctx) == \
        (2, 16, 4, 4, 64, 657, 64)
    assert (cfg.act_fn, cfg.normalization_type, cfg.positional_embedding_type) == ("gelu_new", "LN", "standard")


def test_generate_takes_a_batch_of_one_and_text(run):
    ids = run.to_tokens(TEXT)
    a = run.generate(ids, max_new_tokens=3, temperature=0)
    b = run.generate(ids[0].tolist(), max_new=3, temperature=0)
    c = run.generate(TEXT, max_new_tokens=3, temperature=0)
    assert a["ids"] == b["ids"] == c["ids"] and a["ids"][:ids.shape[1]] == ids[0].tolist()
    with pytest.raises(ValueError, match=r"tokens: expected one sequence, shape \(T,\) or \(1, T\)"):
        run.generate(np.concatenate([ids, ids]), max_new_tokens=1)


def test_cache_remove_batch_dim_and_stack_activation(run):
    _, cache = run.run_with_cache(run.to_tokens(TEXT))
    stacked = cache.stack_activation("pattern")
    assert stacked.shape == (2,) + cache["blocks.0.attn.pattern"].shape
    resid = cache.accumulated_resid()
    cache.remove_batch_dim()
    assert cache["blocks.0.attn.pattern"].shape == stacked.shape[2:]
    np.testing.assert_allclose(cache.accumulated_resid(), resid[:, 0])
    with pytest.raises(ValueError, match="only a batch of one"):
        run.run_with_cache(np.concatenate([run.to_tokens(TEXT)] * 2))[1].remove_batch_dim()


def test_the_full_resid_decomposition_sums_to_the_residual(run):
    _, cache = run.run_with_cache(run.to_tokens(TEXT))
    final = cache.accumulated_resid()[-1]
    stack, labels = cache.get_full_resid_decomposition(return_labels=True)
    assert len(labels) == stack.shape[0] == 2 * 4 + 2 * 64 + 3
    assert labels[:2] == ["L0H0", "L0H1"] and labels[8] == "L0N0" and labels[-3:] == ["embed", "pos_embed", "bias"]
    np.testing.assert_allclose(stack.sum(0), final, atol=1e-4)
    mid = cache.get_full_resid_decomposition(1, mlp_input=True, expand_neurons=False)
    np.testing.assert_allclose(mid.sum(0), cache["blocks.1.resid_mid"], atol=1e-4)
    last = cache.get_full_resid_decomposition(pos_slice=-1)
    np.testing.assert_allclose(last, stack[:, :, -1])
