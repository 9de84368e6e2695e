#!/usr/bin/env python3
"""Checks the induction circuit of trained runs against docs/circuits.md's thresholds.

For each run folder: reads scores.json (previous-token and induction scores), runs `attograd circuits RUN
--json` and `attograd patch RUN --json` on a clean input "BOS f f A B x3..x8 g g A" and a corrupt one with
the first B replaced, and prints one line per threshold with the numbers and PASS/FAIL.
Usage: scripts/check_induction_circuit.py [--attograd build/attograd] RUN [RUN ...]
Exit 0 when every threshold of every run passes, 1 otherwise.
"""

import argparse
import json
import subprocess
import sys


def run_json(attograd, *args):
    out = subprocess.run([attograd, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def check(run, attograd):
    scores = json.load(open(f"{run}/scores.json"))["heads"]
    layer0 = [h for h in scores if h["layer"] == 0]
    layer1 = [h for h in scores if h["layer"] == 1]
    prev = max(layer0, key=lambda h: h["previous_token"])
    ind = max(layer1, key=lambda h: h["induction"])
    circuits = run_json(attograd, "circuits", run, "--json")
    base_k = circuits["baseline"]["k"]
    into = [c for c in circuits["composition"] if c["to"] == [1, ind["head"]]]
    best = max(into, key=lambda c: c["k"])
    chosen = next(c for c in into if c["from"] == [0, prev["head"]])
    heads = {(h["layer"], h["head"]): h for h in circuits["heads"]}
    results = []
    results.append((f"K-comp L0H{prev['head']} (prev {prev['previous_token']:.2f}) -> L1H{ind['head']} "
                    f"(induction {ind['induction']:.2f}) = {chosen['k']:.3f}, largest into it "
                    f"{best['k']:.3f} from L{best['from'][0]}H{best['from'][1]}, baseline {base_k:.3f} "
                    f"(ratio {chosen['k'] / base_k:.2f})",
                    chosen is best and chosen["k"] >= 1.5 * base_k))
    pos = heads[(0, prev["head"])]["prev_token_positional"]
    results.append((f"positional prev-token mass of L0H{prev['head']} = {pos:.3f} (>= 0.5)", pos >= 0.5))
    inductions = [h for h in layer1 if h["induction"] >= 0.3] or [ind]
    for h in inductions:
        c = heads[(1, h["head"])]["copying"]
        results.append((f"copying of induction head L1H{h['head']} (induction {h['induction']:.2f}) = {c:.3f} "
                        f"(> 0.5)", c > 0.5))
    # Patching: BOS f f A B x3..x8 g g A (a block of 8, as the task draws); corrupt replaces the first B.
    clean = "BOS 11 12 1 2 3 4 5 6 7 8 13 14 1"
    corrupt = "BOS 11 12 1 20 3 4 5 6 7 8 13 14 1"
    p = run_json(attograd, "patch", run, "--clean", clean, "--corrupt", corrupt, "--json")
    b_pos, last = 4, 13
    r0 = next(x["recovered"] for x in p["resid_pre"] if x["layer"] == 0 and x["position"] == b_pos)
    results.append((f"patch {clean!r} / B->20: clean {p['clean']:.2f}, corrupt {p['corrupt']:.2f} (answer id "
                    f"{p['answer']}, wrong id {p['wrong']}); resid_pre 0 at B's position recovers {r0:.3f} (>= 0.8)",
                    r0 >= 0.8))
    z = {(x["layer"], x["head"]): x["recovered"] for x in p["head_z"] if x["position"] == last}
    l0 = max(v for (l, h), v in z.items() if l == 0)
    zi = z[(1, ind["head"])]
    results.append((f"z at the last position: induction head L1H{ind['head']} {zi:.3f} vs best layer-0 head "
                    f"{l0:.3f}; all: " + ", ".join(f"L{l}H{h} {v:.3f}" for (l, h), v in sorted(z.items())),
                    zi > l0))
    ok = True
    print(run)
    for text, passed in results:
        ok = ok and passed
        print(f"  {'PASS' if passed else 'FAIL'}  {text}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attograd", default="build/attograd")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    ok = all([check(run, args.attograd) for run in args.runs])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
