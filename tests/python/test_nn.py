# The engine for a model of one's own (attograd.nn, attograd.optim, attograd.Task): a training loop written
# in Python trains configs/reverse.json's task to 100% held-out exact match, and with the trainer's pieces
# (CausalLM.forward_backward, optim.from_config, Task.batch) it is the trainer: the same parameters, bit for
# bit, as `attograd train` after the same steps. A model assembled from the modules trains too.
import json

import numpy as np
import pytest

import attograd
from conftest import config_path

# Enough steps of the cosine schedule for reverse (length 8) to reach 100% held-out, measured at 300..400.
REVERSE_STEPS = 500


def reverse_config(steps=REVERSE_STEPS, **train):
    with open(config_path("reverse.json")) as f:
        cfg = json.load(f)
    cfg["train"].update({"steps": steps, "eval_every": steps, "log_every": steps, "eval_size": 256}, **train)
    cfg["output"] = {"attention_every": 0, "checkpoint_every": 0}
    return cfg


def exact_match(logits, batch):
    right = (logits.argmax(-1) == batch["targets"]) | ~batch["scored"]
    return right.all(axis=1).mean()


def python_loop(cfg, steps):
    """The trainer's step in Python: batch, sharded forward and backward, clip, schedule, AdamW."""
    model = attograd.nn.CausalLM(cfg)
    task = attograd.Task(cfg)
    opt = attograd.optim.from_config(model, cfg)
    losses = []
    for step in range(steps):
        b = task.batch(step)
        losses.append(model.forward_backward(b["ids"], b["targets"]))
        opt.clip_grad_norm(cfg["train"]["grad_clip"])
        opt.lr = attograd.optim.learning_rate(cfg, step)
        opt.step()
    return model, task, losses


def test_python_loop_is_the_trainer_bit_for_bit(tmp_path):
    steps = 40
    cfg = reverse_config(steps)
    model, _, _ = python_loop(cfg, steps)
    run = attograd.train(cfg, out=str(tmp_path / "reverse"))
    theirs = run.parameters()
    ours = model.state_dict()
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        assert np.array_equal(ours[name], theirs[name]), name


def test_python_loop_trains_reverse_to_100_percent():
    cfg = reverse_config()
    model, task, losses = python_loop(cfg, REVERSE_STEPS)
    assert losses[-1] < 0.05 * losses[0]
    held = task.heldout()
    logits = model(held["ids"]).numpy()
    assert exact_match(logits, held) == 1.0


def test_loss_backward_equals_forward_backward():
    cfg = reverse_config()
    a, b = attograd.nn.CausalLM(cfg), attograd.nn.CausalLM(cfg)
    batch = attograd.Task(cfg).batch(0)
    loss = a.loss(batch["ids"], batch["targets"])
    loss.backward()
    value = b.forward_backward(batch["ids"], batch["targets"], shards=1)
    assert loss.item() == pytest.approx(value, rel=1e-6)
    ga, gb = a.named_parameters(), b.named_parameters()
    for name in ga:
        np.testing.assert_allclose(ga[name].grad, gb[name].grad, rtol=1e-5, atol=1e-7, err_msg=name)


class TinyLM:
    """A one-block causal LM written in Python from the bound modules."""

    def __init__(self, vocab, max_len, d_model=64):
        rng = np.random.default_rng(0)
        self.tok = attograd.Tensor(rng.normal(0, 0.1, (vocab, d_model)).astype(np.float32), requires_grad=True)
        self.pos = attograd.Tensor(rng.normal(0, 0.1, (max_len, d_model)).astype(np.float32), requires_grad=True)
        self.block = attograd.nn.TransformerBlock({"d_model": d_model, "n_heads": 2, "d_ff": 4 * d_model}, seed=1)
        self.ln = attograd.nn.LayerNorm(d_model)
        self.head = attograd.nn.Linear(d_model, vocab, seed=2)

    def modules(self):
        return [self.tok, self.pos, self.block, self.ln, self.head]

    def __call__(self, ids):
        T = ids.shape[1]
        h = self.tok[ids] + self.pos[:T]
        return self.head(self.ln(self.block(h)))


def test_model_from_modules_learns_reverse():
    cfg = reverse_config()
    task = attograd.Task(cfg)
    model = TinyLM(task.vocab_size, task.seq_len)
    opt = attograd.optim.AdamW(model.modules(), lr=3e-3, weight_decay=0.01)
    V = task.vocab_size
    first = None
    for step in range(150):
        b = task.batch(step)
        opt.zero_grad()
        logits = model(b["ids"])
        loss = attograd.cross_entropy(logits.reshape([-1, V]), b["targets"].reshape(-1))
        loss.backward()
        opt.clip_grad_norm(1.0)
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
    held = task.heldout(128)
    acc = ((model(held["ids"]).numpy().argmax(-1) == held["targets"]) | ~held["scored"]).mean()
    assert acc > 0.5  # positions right, far above chance (1 / 10 of the scored ones)


def test_modules_shapes_and_parameters():
    lin = attograd.nn.Linear(4, 3, bias=False, seed=5)
    assert lin.bias is None and lin.weight.shape == (3, 4)
    assert list(lin.named_parameters()) == ["weight"]
    x = attograd.Tensor(np.ones((2, 4), np.float32))
    np.testing.assert_allclose(lin(x).numpy(), np.ones((2, 4), np.float32) @ lin.weight.numpy().T, rtol=1e-6)
    mha = attograd.nn.MultiHeadAttention(8, 2, seed=1)
    assert mha.d_head == 4 and mha(attograd.Tensor(np.ones((1, 5, 8), np.float32))).shape == (1, 5, 8)
    assert sorted(mha.named_parameters())[0] == "wk.bias"
    lm = attograd.nn.CausalLM(reverse_config())
    assert lm.parameter_count == sum(v.size for v in lm.state_dict().values())
    assert len(lm.blocks) == 1 and "ln1.weight" in lm.blocks[0].named_parameters()
    # load_state_dict writes every parameter: a model of another seed becomes this one.
    other = attograd.nn.CausalLM(reverse_config(), seed=7)
    assert not np.array_equal(other.state_dict()["tok_emb.weight"], lm.state_dict()["tok_emb.weight"])
    other.load_state_dict(lm.state_dict())
    ids = np.arange(2, 10, dtype=np.int32)[None]
    np.testing.assert_array_equal(other(ids).numpy(), lm(ids).numpy())
    # The block shares the model's parameters.
    assert np.array_equal(lm.blocks[0].named_parameters()["attn.wq.weight"].numpy(),
                          lm.state_dict()["blocks.0.attn.wq.weight"])


def test_optimizer_state_round_trip_and_muon():
    cfg = reverse_config()
    batch = attograd.Task(cfg).batch(0)
    runs = []
    for restore in (False, True):
        model = attograd.nn.CausalLM(cfg)
        opt = attograd.optim.Muon(model, lr=1e-3, muon_lr=0.02)
        model.forward_backward(batch["ids"], batch["targets"])
        opt.step()
        if restore:  # a fresh optimiser given the first's state continues as the first does
            state = opt.state_dict()
            opt = attograd.optim.Muon(model, lr=1e-3, muon_lr=0.02)
            opt.load_state_dict(state)
            assert opt.steps_taken == 1
        model.forward_backward(batch["ids"], batch["targets"])
        opt.step()
        runs.append(model.state_dict())
    for name in runs[0]:
        assert np.array_equal(runs[0][name], runs[1][name]), name
    muon_cfg = reverse_config(optimizer="muon")
    assert isinstance(attograd.optim.from_config(attograd.nn.CausalLM(muon_cfg), muon_cfg), attograd.optim.Muon)
