"""ctest python/pip_install: `pip install .` of the checkout into a fresh venv, then a notebook's first cells
there without PYTHONPATH (docs/python.md "Install").

    pip_install.py SOURCE_DIR BUILD_DIR

The venv (python3 -m venv --system-site-packages: numpy, setuptools and wheel are Debian's) gets the package
by `pip install --no-build-isolation --no-index SOURCE_DIR` with ATTOGRAD_BUILD_DIR=BUILD_DIR, so setup.py
takes the _core this build compiled instead of compiling it again (seconds, not minutes). Then, in the venv:
`import attograd` must come from the venv's site-packages, train a tiny run, open it with load_run and run a
cached forward through ActivationCache's helpers (this file again, as `pip_install.py --notebook VENV
SOURCE_DIR` in the venv's python). Everything is written under one temporary folder (TMPDIR
too, pip without a cache); the checkout must be left as it was (git status, and no build/ or *.egg-info
from setuptools).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time


def notebook(venv, source):
    """In the venv (--notebook): the first cells of a notebook, on the installed package."""
    import attograd

    assert os.path.realpath(attograd.__file__).startswith(os.path.realpath(venv) + os.sep), attograd.__file__
    core = attograd._core.__file__
    assert os.path.dirname(core) == os.path.dirname(attograd.__file__), core
    out = os.path.join(tempfile.mkdtemp(), "reverse")
    log = []
    sets = ["model.d_model=16", "model.d_ff=32", "train.steps=20", "train.warmup=5", "train.eval_every=10",
            "train.log_every=10", "train.eval_size=16", "train.threads=1", "output.attention_every=0",
            "output.checkpoint_every=0"]
    trained = attograd.train(os.path.join(source, "configs", "reverse.json"), out=out, set=sets,
                             progress=log.append)
    assert trained.step == 20 and log, (trained.step, log)
    trained.close()
    with attograd.load_run(out) as run:
        ids = run.to_tokens("3 1 4 1 5 9 2 6 SEP")
        logits, cache = run.run_with_cache(ids)
        assert isinstance(cache, attograd.ActivationCache), type(cache)
        assert logits.shape == (1, ids.shape[1], len(run.vocab)), logits.shape
        stack, labels = cache.accumulated_resid(apply_ln=True, return_labels=True)
        assert labels == ["0_pre", "final_post"], labels
        assert stack.shape == (2, 1, ids.shape[1], 16), stack.shape
        assert cache.logit_attrs(stack, "3").shape == (2, 1, ids.shape[1])
        assert run.W_Q.shape == (1, 2, 16, 8), run.W_Q.shape
        assert attograd.utils.get_act_name("z", 0) in cache
    print("attograd", attograd.__file__, "trained", out, "cache of", len(cache), "points")


def git_state(source):
    """`git status --porcelain --ignored` of the checkout, or None when it is not a git checkout."""
    try:
        p = subprocess.run(["git", "--no-optional-locks", "-C", source, "status", "--porcelain", "--ignored"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(p.stdout.splitlines()) if p.returncode == 0 else None


def run(args, env, cwd):
    """Runs a command, printing its output; exits with its output when it fails."""
    p = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=500)
    if p.returncode != 0:
        sys.exit(f"pip_install: {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    source, build = (os.path.abspath(a) for a in sys.argv[1:3])
    # Built folders inside the checkout (build/, as scripts/test makes) are ctest's own, and __pycache__
    # folders those of any Python that ran meanwhile; other entries of git status must not change.
    def outside_build(state):
        rel = os.path.relpath(build, source)
        return None if state is None else {s for s in state
                                           if not s[3:].startswith(rel + "/") and "__pycache__" not in s}

    before = outside_build(git_state(source))
    tmp = tempfile.mkdtemp(prefix="attograd-pip-")
    try:
        venv = os.path.join(tmp, "venv")
        os.makedirs(os.path.join(tmp, "tmp"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
        env.update(TMPDIR=os.path.join(tmp, "tmp"), HOME=tmp, PIP_NO_CACHE_DIR="1",
                   PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
        start = time.monotonic()
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], env, tmp)
        venv_seconds = time.monotonic() - start
        start = time.monotonic()
        run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", source],
            dict(env, ATTOGRAD_BUILD_DIR=build), tmp)
        pip_seconds = time.monotonic() - start
        print(f"pip_install: venv {venv_seconds:.1f} s, pip install {pip_seconds:.1f} s")
        notebook_command = [os.path.join(venv, "bin", "python"), os.path.abspath(__file__), "--notebook",
                            venv, source]
        print(run(notebook_command, env, tmp), end="")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    strays = [p for p in ("python/build", "attograd.egg-info", "python/attograd.egg-info")
              if os.path.exists(os.path.join(source, p))]
    after = outside_build(git_state(source))
    if before is not None and after != before:
        strays += sorted(after - before)
    if strays:
        sys.exit(f"pip_install: the install wrote into the checkout: {', '.join(strays)}")


if __name__ == "__main__":
    if sys.argv[1] == "--notebook":
        notebook(*sys.argv[2:4])
    else:
        main()
