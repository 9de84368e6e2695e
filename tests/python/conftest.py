# Shared fixtures of the Python module's tests: the module from the build folder (ctest puts it first on
# PYTHONPATH), the attograd program of the same build, one briefly trained induction run that the module
# and the program both read, and a tiny modular-addition run for the Fourier tool.
import json
import os
import subprocess

import pytest

import attograd

SOURCE_DIR = os.environ.get("ATTOGRAD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("ATTOGRAD_BINARY", os.path.join(SOURCE_DIR, "build", "attograd"))
# Short: the tests compare the module with the program on the same checkpoint, not a trained circuit.
INDUCTION_SETS = ["train.steps=150", "train.eval_every=50", "train.log_every=50", "train.eval_size=64",
                  "output.attention_every=0", "output.checkpoint_every=0", "train.threads=1"]

# A few dozen steps of a narrow model: the Fourier tool reads any modular-addition checkpoint, trained or not.
MODADD_SETS = ["model.d_model=16", "model.d_ff=32", "model.n_layers=1", "model.n_heads=2", "train.steps=30",
               "train.warmup=5", "train.eval_every=30", "train.log_every=30", "train.eval_size=16",
               "output.attention_every=0", "output.checkpoint_every=0", "train.threads=1"]


def config_path(name):
    return os.path.join(SOURCE_DIR, "configs", name)


def cli(*args, expect=0):
    """Runs the attograd program; returns (stdout, stderr) and checks its exit code."""
    p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == expect, f"attograd {' '.join(args)}: exit {p.returncode}\n{p.stderr}"
    return p.stdout, p.stderr


def cli_json(*args):
    return json.loads(cli(*args)[0])


@pytest.fixture(scope="session")
def induction_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("runs") / "induction")
    attograd.train(config_path("induction.json"), out=out, set=INDUCTION_SETS)
    return out


@pytest.fixture(scope="session")
def modadd_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("runs") / "modadd")
    attograd.train(config_path("modadd.json"), out=out, set=MODADD_SETS)
    return out


@pytest.fixture()
def run(induction_dir):
    r = attograd.load_run(induction_dir)
    yield r
    r.close()


# A two-run sweep of a tiny config, trained once by attograd.sweep: the sweep tools' cases read it.
SWEEP_BASE = {"name": "tiny", "seed": 1, "task": {"kind": "copy", "vocab": 8, "length": 4},
              "model": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32},
              "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "log_every": 10, "eval_size": 16,
                        "threads": 1},
              "output": {"attention_every": 0, "checkpoint_every": 0}}


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    (root / "base.json").write_text(json.dumps(SWEEP_BASE))
    out = str(root / "out")
    path = str(root / "sweep.json")
    with open(path, "w") as f:
        json.dump({"base": str(root / "base.json"), "grid": {"seed": [1, 2]}, "out": out}, f)
    first = attograd.sweep(path, jobs=2, program=BINARY)
    assert [r["outcome"] for r in first["runs"]] == ["finished", "finished"], first
    return {"file": path, "out": out}
