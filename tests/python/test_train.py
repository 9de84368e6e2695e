# attograd.train: configs validated as the command line validates them (same messages), the run folder it
# writes, progress records, overwrite, and Ctrl-C (a checkpoint, then KeyboardInterrupt).
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import attograd
from conftest import cli, config_path

TINY = {"name": "tiny", "seed": 3, "task": {"kind": "copy", "vocab": 8, "length": 4},
        "model": {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32},
        "train": {"steps": 40, "batch_size": 16, "eval_every": 20, "log_every": 10, "eval_size": 32,
                  "threads": 1},
        "output": {"attention_every": 0, "checkpoint_every": 0}}


def test_a_dict_and_a_file_train_the_same_run(tmp_path):
    records = []
    a = attograd.train(TINY, out=str(tmp_path / "a"), progress=records.append)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    cli("train", str(path), "--out", str(tmp_path / "b"))
    assert [r["step"] for r in records] == [10, 20, 30, 40]
    untimed = lambda r: {k: v for k, v in r.items() if k != "tokens_per_s"}  # noqa: E731
    with open(tmp_path / "b" / "metrics.jsonl") as f:
        assert [untimed(r) for r in records] == [untimed(json.loads(line)) for line in f]
    b = attograd.load_run(str(tmp_path / "b"))
    a_cfg, b_cfg = a.config, b.config
    assert a_cfg["output"].pop("dir").endswith("/a") and b_cfg["output"].pop("dir").endswith("/b")
    assert a.step == 40 and a_cfg == b_cfg
    for name, value in a.parameters().items():
        assert (value == b.parameters()[name]).all(), name
    assert os.path.exists(tmp_path / "a" / "scores.json") and os.path.exists(tmp_path / "a" / "report.html")


def test_an_existing_run_needs_overwrite(tmp_path):
    out = str(tmp_path / "r")
    attograd.train(TINY, out=out)
    with pytest.raises(ValueError, match="already holds a trained run.*overwrite=True"):
        attograd.train(TINY, out=out)
    assert attograd.train(TINY, out=out, overwrite=True, set=["train.steps=20"]).step == 20


@pytest.mark.parametrize("field,value", [("train.lr", -1), ("model.n_heads", 3), ("task.kind", "nope"),
                                         ("train.stepz", 5)])
def test_config_errors_are_the_command_lines(tmp_path, field, value):
    cfg = json.loads(json.dumps(TINY))
    section, key = field.split(".")
    cfg[section][key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(attograd.ConfigError) as from_path:
        attograd.train(str(path), out=str(tmp_path / "x"))
    _, err = cli("train", str(path), "--out", str(tmp_path / "y"), expect=2)
    assert "attograd train: " + str(from_path.value) == err.strip()
    assert "\n" not in str(from_path.value)
    with pytest.raises(attograd.ConfigError) as from_dict:  # the same message, the source named "config"
        attograd.train(cfg, out=str(tmp_path / "z"))
    assert str(from_dict.value) == str(from_path.value).replace(str(path), "config")
    assert isinstance(from_dict.value, ValueError)


def test_set_overrides_and_missing_files(tmp_path):
    with pytest.raises(attograd.ConfigError, match="train.steps"):
        attograd.train(config_path("reverse.json"), out=str(tmp_path / "r"), set=["train.steps=-4"])
    with pytest.raises(FileNotFoundError, match="nope.json"):
        attograd.train(str(tmp_path / "nope.json"))


def test_an_exception_in_progress_stops_the_run(tmp_path):
    def boom(record):
        raise ZeroDivisionError("from progress")

    with pytest.raises(ZeroDivisionError, match="from progress"):
        attograd.train(TINY, out=str(tmp_path / "p"), progress=boom)
    assert os.path.exists(tmp_path / "p" / "checkpoint" / "model.safetensors")


class Stop(Exception):
    pass


def test_resume_continues_to_the_uninterrupted_run(tmp_path):
    full = attograd.train(TINY, out=str(tmp_path / "full"))
    out = str(tmp_path / "cut")

    def stop_at_20(record):
        if record["step"] == 20:
            raise Stop()

    with pytest.raises(Stop):
        attograd.train(TINY, out=out, progress=stop_at_20)
    cut = attograd.run_state(out)
    assert cut["state"] == "partial" and 20 <= cut["step"] < 40 and cut["steps"] == 40, cut
    resumed = attograd.train(out, resume=True)
    assert resumed.step == full.step == 40
    assert attograd.run_state(out)["state"] == "finished"
    for name, value in full.parameters().items():
        assert (value == resumed.parameters()[name]).all(), name
    # Longer with set; what would change the past is refused, as on the command line.
    assert attograd.train(out, resume=True, set=["train.steps=50"]).step == 50
    with pytest.raises(attograd.ConfigError, match="cannot change when resuming"):
        attograd.train(out, resume=True, set=["train.lr=0.1"])
    with pytest.raises(ValueError, match="no checkpoint at"):
        attograd.train(str(tmp_path / "none"), resume=True)
    with pytest.raises(ValueError, match="^out: not with resume=True"):
        attograd.train(out, resume=True, out=str(tmp_path / "x"))


CHILD = """
import sys, attograd
cfg = {"task": {"kind": "copy", "vocab": 8, "length": 4}, "model": {"d_model": 16, "n_heads": 2,
       "n_layers": 1, "d_ff": 32}, "train": {"steps": 1000000, "batch_size": 8, "log_every": 1,
       "eval_every": 1000000, "threads": 1}, "output": {"attention_every": 0, "checkpoint_every": 0}}
try:
    attograd.train(cfg, out=sys.argv[1], progress=lambda r: print("step", r["step"], flush=True))
except KeyboardInterrupt as e:
    print("interrupted:", e, flush=True)
    sys.exit(0)
"""


def test_ctrl_c_checkpoints_and_raises_keyboard_interrupt(tmp_path):
    out = str(tmp_path / "c")
    p = subprocess.Popen([sys.executable, "-c", CHILD, out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    first = p.stdout.readline()
    assert first.startswith("step"), first + p.communicate(timeout=60)[0]
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    rest = p.communicate(timeout=120)[0]
    assert p.returncode == 0, rest
    assert "interrupted: interrupted at step" in rest and "attograd train --resume " + out in rest
    step = int(rest.split("interrupted at step ")[1].split(":")[0])
    assert step > 0
    assert attograd.load_run(out).step == step


def test_init_from_starts_from_the_runs_weights(tmp_path):
    # model.init_from goes through the same config loader: the fine-tuned run's step-0 line is the held-out
    # loss of the weights it started from, which the first run's last evaluation measured on the same
    # held-out sequences (same seed and eval_size).
    first = attograd.train(TINY, out=str(tmp_path / "first"), set=["train.steps=20"])
    cfg = json.loads(json.dumps(TINY))
    cfg["model"]["init_from"] = str(tmp_path / "first")
    records = []
    second = attograd.train(cfg, out=str(tmp_path / "second"), progress=records.append)
    with open(tmp_path / "first" / "metrics.jsonl") as f:
        last = [json.loads(line) for line in f][-1]
    assert records[0]["step"] == 0 and records[0]["eval_loss"] == last["eval_loss"]
    assert second.config["model"]["init_from"] == str(tmp_path / "first")
    assert first.step == 20 and second.step == 40
    cfg["model"]["d_ff"] = 64
    with pytest.raises(ValueError, match="model.d_ff is 64 here but 32 in .*first/config.json") as refused:
        attograd.train(cfg, out=str(tmp_path / "third"))
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(cfg))
    _, err = cli("train", str(path), "--out", str(tmp_path / "fourth"), expect=2)
    assert "attograd train: " + str(refused.value) == err.strip()
