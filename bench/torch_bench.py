"""PyTorch side of attograd's benchmark: the same model and training step, timed the same way.

Reads an attograd bench config (bench/configs/*.json: a "random" task of uniform random tokens), builds
docs/architecture.md's pre-LN GPT in float32 with explicit attention (matmul, masked_fill, softmax, matmul), and times
full training steps: forward, next-token cross-entropy on every position, backward, global-norm gradient
clipping, AdamW (betas 0.9/0.999, eps 1e-8, weight decay on the 2-d weight matrices except the embeddings,
constant lr from the config). With --forward, forward passes alone under torch.no_grad() instead (as
`attograd bench --forward`). Warm-up steps are excluded. Prints one JSON line with the fields of
`attograd bench`.

Give PyTorch its best setting on this machine (Debian's OpenBLAS 0.3.21 does not know the CPU):
    OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=passive /usr/bin/python3 bench/torch_bench.py \
        bench/configs/small.json --threads 2
(with OPENBLAS_L2_SIZE unset). torch.set_num_threads does not reach Debian's OpenBLAS (PyTorch is built
with a generic BLAS), so --threads is also passed to OpenBLAS through its C API; without OpenBLAS (Debian's
reference libblas3 only, ~20x slower at GEMM) it stops with an error: install libopenblas0-pthread.
"""

import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_MODEL = {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 256, "attention_only": False}
DEFAULT_TRAIN = {"batch_size": 64, "lr": 0.001, "weight_decay": 0.01, "grad_clip": 1.0, "threads": 2}
LAYER_NORM_EPS = 1e-5


def xavier_normal_(weight):
    """docs/architecture.md's init: normal with std sqrt(2 / (fan_in + fan_out))."""
    fan_out, fan_in = weight.shape
    nn.init.normal_(weight, 0.0, math.sqrt(2.0 / (fan_in + fan_out)))


def make_linear(n_in, n_out):
    linear = nn.Linear(n_in, n_out)
    xavier_normal_(linear.weight)
    nn.init.zeros_(linear.bias)
    return linear


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.n_heads = n_heads
        self.wq = make_linear(d_model, d_model)
        self.wk = make_linear(d_model, d_model)
        self.wv = make_linear(d_model, d_model)
        self.wo = make_linear(d_model, d_model)
        causal = torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", causal, persistent=False)

    def forward(self, x):
        batch, seq_len, d_model = x.shape
        dk = d_model // self.n_heads

        def split_heads(projection):
            return projection.view(batch, seq_len, self.n_heads, dk).transpose(1, 2)  # [B, H, T, dk]

        q, k, v = split_heads(self.wq(x)), split_heads(self.wk(x)), split_heads(self.wv(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dk)
        scores = scores.masked_fill(self.causal_mask[:seq_len, :seq_len], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        heads = torch.matmul(weights, v).transpose(1, 2).reshape(batch, seq_len, d_model)
        return self.wo(heads)


class MLP(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = make_linear(d_model, d_ff)
        self.fc2 = make_linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, max_len, attention_only):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
        self.attn = MultiHeadAttention(d_model, n_heads, max_len)
        self.attention_only = attention_only
        if not attention_only:
            self.ln2 = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
            self.mlp = MLP(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        if not self.attention_only:
            x = x + self.mlp(self.ln2(x))
        return x


class CausalLM(nn.Module):
    """docs/architecture.md's pre-LN GPT; its state_dict names are the checkpoint names."""

    def __init__(self, vocab, max_len, d_model, n_heads, n_layers, d_ff, attention_only):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        xavier_normal_(self.tok_emb.weight)
        xavier_normal_(self.pos_emb.weight)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, d_ff, max_len, attention_only) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model, eps=LAYER_NORM_EPS)
        self.lm_head = make_linear(d_model, vocab)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(positions)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def set_blas_threads(threads, allow_reference_blas):
    """Give Debian's OpenBLAS (behind libblas.so.3) the same thread count. Without OpenBLAS, PyTorch's
    GEMMs run ~20x slower and a comparison would mislead, so that stops the bench unless allowed."""
    try:
        blas = ctypes.CDLL("libblas.so.3")
        blas.openblas_set_num_threads(threads)
    except (OSError, AttributeError):
        message = ("torch_bench: libblas.so.3 is not OpenBLAS, PyTorch's GEMMs would run on the slow "
                   "reference BLAS: apt-get install libopenblas0-pthread (or pass --allow-reference-blas)")
        if not allow_reference_blas:
            sys.exit(message)
        print(message, file=sys.stderr)


def load_config(path):
    with open(path) as f:
        config = json.load(f)
    task = config["task"]
    if task.get("kind") != "random":
        sys.exit(f"{path}: /task/kind: expected \"random\", got {task.get('kind')!r}")
    return {
        "name": config.get("name", os.path.splitext(os.path.basename(path))[0]),
        "seed": config.get("seed", 42),
        "vocab": task["vocab"],
        "seq_len": task["length"],
        "model": {**DEFAULT_MODEL, **config.get("model", {})},
        "train": {**DEFAULT_TRAIN, **config.get("train", {})},
    }


def make_optimizer(model, train):
    """AdamW; weight decay on the 2-d weight matrices except the embeddings."""
    decayed, not_decayed = [], []
    for name, param in model.named_parameters():
        is_embedding = name.startswith(("tok_emb.", "pos_emb."))
        (decayed if param.dim() == 2 and not is_embedding else not_decayed).append(param)
    groups = [{"params": decayed, "weight_decay": train["weight_decay"]},
              {"params": not_decayed, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train["lr"], betas=(0.9, 0.999), eps=1e-8)


def model_flops_per_step(model, config):
    """A training step: 6 x non-embedding params x tokens + attention's 12 x layers x T^2 x d_model x B
    (a forward pass is a third of it)."""
    non_embedding = sum(p.numel() for name, p in model.named_parameters()
                        if not name.startswith(("tok_emb.", "pos_emb.")))
    batch, seq_len = config["train"]["batch_size"], config["seq_len"]
    m = config["model"]
    return (6 * non_embedding * batch * seq_len
            + 12 * m["n_layers"] * seq_len ** 2 * m["d_model"] * batch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="bench config JSON (task.kind \"random\")")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default 3)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: the config's train.threads)")
    parser.add_argument("--peak-gflops", type=float, help="machine peak (attograd's peak_fma_gflops), for mfu")
    parser.add_argument("--forward", action="store_true",
                        help="time forward passes under torch.no_grad() instead of training steps")
    parser.add_argument("--allow-reference-blas", action="store_true",
                        help="run even when libblas.so.3 is not OpenBLAS (a warning instead of an error)")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")

    config = load_config(args.config)
    train, m = config["train"], config["model"]
    threads = args.threads if args.threads is not None else train["threads"]
    torch.set_num_threads(threads)
    set_blas_threads(threads, args.allow_reference_blas)
    torch.manual_seed(config["seed"])

    batch, seq_len, vocab = train["batch_size"], config["seq_len"], config["vocab"]
    model = CausalLM(vocab, seq_len, m["d_model"], m["n_heads"], m["n_layers"], m["d_ff"],
                     m["attention_only"])
    optimizer = make_optimizer(model, train)
    params = list(model.parameters())

    step_seconds = []
    for step in range(args.warmup + args.steps):
        sequences = torch.randint(0, vocab, (batch, seq_len + 1))
        inputs, targets = sequences[:, :-1], sequences[:, 1:]
        start = time.perf_counter()
        if args.forward:
            with torch.no_grad():
                logits = model(inputs)
            check = logits[-1, -1, -1].item()
        else:
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if train["grad_clip"]:
                torch.nn.utils.clip_grad_norm_(params, train["grad_clip"])
            optimizer.step()
            check = loss.item()
        elapsed = time.perf_counter() - start
        if not math.isfinite(check):
            sys.exit(f"{args.config}: {'a logit' if args.forward else 'the loss'} became {check} at step {step}")
        if step >= args.warmup:
            step_seconds.append(elapsed)

    median = statistics.median(step_seconds)
    flops = model_flops_per_step(model, config) / (3 if args.forward else 1)
    gflops_per_s = flops / median / 1e9
    print(json.dumps({
        "impl": "pytorch",
        "config": config["name"],
        "mode": "forward" if args.forward else "train",
        "threads": threads,
        "tokens_per_s": batch * seq_len / median,
        "step_ms_median": median * 1e3,
        "step_ms_min": min(step_seconds) * 1e3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params": sum(p.numel() for p in params),
        "gflops_per_s": gflops_per_s,
        "mfu": gflops_per_s / args.peak_gflops if args.peak_gflops else None,
    }))


if __name__ == "__main__":
    main()
