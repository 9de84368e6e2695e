#!/usr/bin/env python3
"""A training step written in Python (attograd.nn.CausalLM, attograd.optim, attograd.Task) against the
trainer's step in C++ (`attograd bench CONFIG`: forward, backward, clip and AdamW on the same config),
alternating A B A B; each side's median step time over `--steps` steps after warm-up. Two Python loops:
"fused" calls the trainer's pieces (forward_backward, clip_grad_norm, step), "graph" builds the loss as a
Tensor and calls backward() on it (one shard). Prints one JSON line. Usage:
  PYTHONPATH=build/python python3 bench/python_train.py [--build build] [--config configs/reverse.json]"""
import argparse
import json
import os
import statistics
import subprocess
import time

import attograd

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--config", default="configs/reverse.json")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--steps", type=int, default=100)
a = ap.parse_args()

with open(a.config) as f:
    cfg = json.load(f)


def python_ms(fused):
    model, task = attograd.nn.CausalLM(cfg), attograd.Task(cfg)
    opt = attograd.optim.from_config(model, cfg)
    clip = cfg["train"].get("grad_clip", 1.0)
    times = []
    for step in range(a.steps + 5):
        b = task.batch(step)  # drawn outside the timed step, as attograd bench draws its batch
        t0 = time.perf_counter()
        if fused:
            model.forward_backward(b["ids"], b["targets"])
        else:
            opt.zero_grad()
            model.loss(b["ids"], b["targets"]).backward()
        opt.clip_grad_norm(clip)
        opt.lr = attograd.optim.learning_rate(cfg, step)
        opt.step()
        if step >= 5:
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def cpp_ms():
    p = subprocess.run([os.path.join(a.build, "attograd"), "bench", a.config, "--steps", str(a.steps),
                        "--peak-gflops", "100"], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["step_ms_median"]


fused, graph, cpp = [], [], []
for _ in range(a.rounds):
    cpp.append(cpp_ms())
    fused.append(python_ms(True))
    graph.append(python_ms(False))
med = statistics.median
print(json.dumps({"config": a.config, "steps": a.steps, "shards": attograd.nn.CausalLM(cfg).config["train"]["shards"],
                  "cpp_ms": cpp, "python_fused_ms": fused, "python_graph_ms": graph,
                  "cpp_median_ms": med(cpp), "python_fused_median_ms": med(fused),
                  "python_graph_median_ms": med(graph), "fused_ratio": med(fused) / med(cpp),
                  "graph_ratio": med(graph) / med(cpp)}))
