"""The SAE training-step benchmark: attograd's bench/sae_step against the same SAE in PyTorch, on the same
activations, alternating the two, reporting each side's median step time.

The SAE (docs/sae.md), TopK with k 32 (so L0 is that of a trained SAE from the first step):
f = relu(topk((x - b_dec) W_enc + b_enc)), x_hat = f W_dec + b_dec, loss = mean over tokens of
||x_hat - x||^2; backward; AdamW (0.9, 0.999, 1e-8, no weight decay);
decoder rows renormalised to unit norm. Both sides time the same step on the same 8 batches of activations
(bench/sae_step --write-x writes them), warm-up steps excluded.

    OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=passive /usr/bin/python3 bench/sae_bench.py build/sae_step \
        [--rounds 5] [--threads 2] [--d-in 256] [--d-sae 2048] [--batch 1024]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
from reference_model import read_safetensors  # noqa: E402
from torch_bench import set_blas_threads  # noqa: E402

K = 32


def torch_steps(x, d_sae, batch, steps, warmup):
    torch.manual_seed(0)
    d_in = x.shape[1]
    w_dec = torch.randn(d_sae, d_in)
    w_dec /= w_dec.norm(dim=1, keepdim=True)
    params = [w_dec.t().clone().requires_grad_(), torch.zeros(d_sae, requires_grad=True),
              w_dec.clone().requires_grad_(), torch.zeros(d_in, requires_grad=True)]
    w_enc, b_enc, w_dec, b_dec = params
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    batches = x.reshape(8, batch, d_in)
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        xb = batches[s % 8]
        opt.zero_grad(set_to_none=True)
        pre = (xb - b_dec) @ w_enc + b_enc
        keep = torch.zeros_like(pre, dtype=torch.bool).scatter_(1, pre.topk(K, dim=1).indices, True)
        f = torch.relu(pre.masked_fill(~keep, 0.0))
        x_hat = f @ w_dec + b_dec
        loss = ((x_hat - xb) ** 2).sum(dim=1).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            w_dec /= w_dec.norm(dim=1, keepdim=True)
            (f > 0).sum(dim=0)
        if s >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sae_step")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--d-in", type=int, default=256)
    ap.add_argument("--d-sae", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    set_blas_threads(args.threads, False)
    common = ["--d-in", str(args.d_in), "--d-sae", str(args.d_sae), "--batch", str(args.batch), "--steps",
              str(args.steps), "--threads", str(args.threads)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.safetensors")
        subprocess.run([args.sae_step, *common, "--steps", "1", "--write-x", path], check=True,
                       stdout=subprocess.DEVNULL)
        tensors, _ = read_safetensors(path)
        x = tensors["x"].float()
    ours, theirs = [], []
    for _ in range(args.rounds):
        out = subprocess.run([args.sae_step, *common], check=True, capture_output=True, text=True).stdout
        ours.append(json.loads(out)["step_ms_median"])
        theirs.append(1e3 * torch_steps(x, args.d_sae, args.batch, args.steps, 5))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "unknown")
    a, t = statistics.median(ours), statistics.median(theirs)
    print(json.dumps({"cpu": cpu, "threads": args.threads, "d_in": args.d_in, "d_sae": args.d_sae,
                      "batch": args.batch, "attograd_step_ms": a, "torch_step_ms": t, "speedup": t / a,
                      "attograd_rounds": ours, "torch_rounds": theirs, "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
