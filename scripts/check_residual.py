#!/usr/bin/env python3
"""Checks the residual-stream tools on trained induction runs against docs/residual.md's thresholds.

For each run folder, on the clean input "BOS f f A B x3..x8 g g A" (answer B) and a corrupt one with the
first B replaced (as scripts/check_induction_circuit.py):
  - `attograd lens --json`: the logit difference read at blocks.1.resid_pre (after layer 0) and at the last
    resid_post, at the last position; the largest positive component there and its induction score
    (scores.json);
  - `attograd patch --attribution --json`: Pearson's r between attribution and activation patching per kind.
Prints one line per threshold with the numbers and PASS/FAIL.
Usage: scripts/check_residual.py [--attograd build/attograd] RUN [RUN ...]
Exit 0 when every threshold of every run passes, 1 otherwise.
"""

import argparse
import json
import math
import subprocess
import sys

CLEAN = "BOS 11 12 1 2 3 4 5 6 7 8 13 14 1"
CORRUPT = "BOS 11 12 1 20 3 4 5 6 7 8 13 14 1"


def run_json(attograd, *args):
    out = subprocess.run([attograd, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def pearson(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    saa = sum((x - ma) ** 2 for x in a)
    sbb = sum((y - mb) ** 2 for y in b)
    return sab / math.sqrt(saa * sbb) if saa > 0 and sbb > 0 else float("nan")


def check(run, attograd):
    scores = {(h["layer"], h["head"]): h for h in json.load(open(f"{run}/scores.json"))["heads"]}
    lens = run_json(attograd, "lens", run, "--tokens", CLEAN, "--answer", "2", "--wrong", "20", "--json")
    last = len(lens["positions"]) - 1
    acc = {a["point"]: a["value"] for a in lens["accumulated"] if a["position"] == last}
    actual = lens["actual"][last]["value"]
    results = []
    before, after = acc["blocks.1.resid_pre"], acc["blocks.1.resid_post"]
    results.append((f"lens at the last position: blocks.0.resid_pre {acc['blocks.0.resid_pre']:.3f}, "
                    f"blocks.1.resid_pre {before:.3f}, blocks.1.resid_post {after:.3f} (actual {actual:.3f}); "
                    f"appears after layer 1 (post > 5 and pre < post / 4)", after > 5 and before < after / 4))
    comps = [(c["value"], c["name"]) for c in lens["components"] if c["position"] == last]
    value, name = max(comps)
    total = sum(v for v, _ in comps)
    head = None
    if name.startswith("blocks.1.attn.head."):
        head = scores[(1, int(name.rsplit(".", 1)[1]))]
    ind = head["induction"] if head else float("nan")
    results.append((f"largest positive component at the last position: {name} {value:.3f} (induction "
                    f"{ind:.2f}; components sum {total:.4f})", head is not None and ind >= 0.5))
    p = run_json(attograd, "patch", run, "--clean", CLEAN, "--corrupt", CORRUPT, "--attribution", "--json")
    need = {"resid_pre": 0.9, "head_z": 0.8}
    for kind in ("resid_pre", "head_z", "head_all", "head_q", "head_k", "head_v", "head_pattern"):
        real = [e["recovered"] for e in p[kind]]
        est = [e["recovered"] for e in p["attribution"][kind]]
        r = pearson(real, est)
        threshold = need.get(kind)
        results.append((f"attribution vs patching, {kind}: Pearson r = {r:.3f} over {len(real)}"
                        + (f" (>= {threshold})" if threshold else ""), threshold is None or r >= threshold))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attograd", default="build/attograd")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    ok = True
    for run in args.runs:
        print(run)
        for text, passed in check(run, args.attograd):
            print(f"  {'PASS' if passed else 'FAIL'}  {text}")
            ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
