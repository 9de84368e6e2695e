#!/usr/bin/env python3
"""run.forward from Python against the same forward in C++ (`attograd bench CONFIG --forward`), on one
config (default bench/configs/tiny.json: B 32, T 32), alternating A B A B; and how often a hooked forward
calls each Python hook. Prints one JSON line. Usage:
  PYTHONPATH=build/python python3 bench/python_forward.py [--build build] [--config ...] [--rounds 5]"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import attograd

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--config", default="bench/configs/tiny.json")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--reps", type=int, default=200)
a = ap.parse_args()

with open(a.config) as f:
    cfg = json.load(f)
B, T = cfg["train"]["batch_size"], cfg["task"]["length"]
out = os.path.join(tempfile.mkdtemp(), "run")
# Trained by the program: in a process that has just trained (attograd.train), forward passes were
# measured about 3x slower, an open question this bench keeps out of its numbers.
subprocess.run([os.path.join(a.build, "attograd"), "train", a.config, "--set", "train.steps=1", "--out", out],
               capture_output=True, check=True)
run = attograd.load_run(out)
ids = np.random.default_rng(0).integers(0, cfg["task"]["vocab"], size=(B, T)).astype(np.int32)


def python_ms():
    for _ in range(10):
        run.forward(ids)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        run.forward(ids)
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def cpp_ms():
    p = subprocess.run([os.path.join(a.build, "attograd"), "bench", a.config, "--forward", "--peak-gflops", "100", "--steps",
                        str(a.reps)], capture_output=True, text=True, check=True)
    j = json.loads(p.stdout.strip().splitlines()[-1])
    return j["step_ms_median"]


py, cpp = [], []
for _ in range(a.rounds):
    cpp.append(cpp_ms())
    py.append(python_ms())

calls = {}
hooks = {p: (lambda v, p: calls.__setitem__(p, calls.get(p, 0) + 1)) for p in run.hook_points()}
for _ in range(3):
    run.forward(ids, hooks=hooks)
print(json.dumps({"config": a.config, "B": B, "T": T, "python_ms": py, "cpp_ms": cpp,
                  "python_median_ms": statistics.median(py), "cpp_median_ms": statistics.median(cpp),
                  "ratio": statistics.median(py) / statistics.median(cpp),
                  "hook_calls_per_point_in_3_forwards": sorted(set(calls.values())),
                  "points": len(calls)}))
