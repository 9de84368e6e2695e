"""PyTorch side of attograd's benchmark: the same model and training step, timed the same way.

Reads an attograd bench config (bench/configs/*.json: a "random" task of uniform random tokens), builds
its model (tests/fixtures/reference_model.py's CausalLM from the config's model section: docs/architecture.md's
pre-LN GPT with explicit attention, matmul, masked_fill, softmax, matmul, and torch's fused F.layer_norm;
attograd's init) in float32, and times
full training steps: forward, next-token cross-entropy on every position, backward, global-norm gradient
clipping, AdamW (betas 0.9/0.999, eps 1e-8, weight decay on the 2-d weight matrices except the embeddings,
constant lr from the config). With --forward, forward passes alone under torch.no_grad() instead (as
`attograd bench --forward`). Warm-up steps are excluded. Prints one JSON line with the fields of
`attograd bench`.

With --text, the config's task is attograd's "text" (configs/text.json): the file at task.path is tokenised
as train/tasks/text.cpp does (every distinct character, or byte, a token, sorted by code point; the first
task.train_fraction of the tokens, 0.9 when unset, for training and the rest held out), and the model is
trained for the config's train.steps (or --steps) on windows of task.length + 1 tokens drawn uniformly from
the training part (a seeded torch.Generator), with attograd's schedule (linear warmup, then cosine down to a
tenth of train.lr, or constant) and its AdamW, every position scored. Each step is timed as above (the
first --warmup steps excluded from the median); after the last step the held-out loss is the mean
cross-entropy over every position of --eval-n random held-out windows (default the config's
train.eval_size), as `attograd eval RUN --n N`. The JSON line adds eval_loss and bits_per_token. Progress
(training and held-out loss every train.eval_every steps) goes to stderr.

With --grokking, the config is configs/grokking.json (task.kind "modadd_bare": the input "a b =", the answer
(a + b) mod p, p = task.vocab, read at the last position) and the model is the config's (configs/grokking.json:
Nanda et al. 2023's one-layer model, no LayerNorm, a ReLU MLP, no biases), vocabulary p + 1 ("=" and the p
values), 3 positions.
The training set is round(task.train_fraction * p^2) pairs drawn by a seeded torch.Generator (timing does not
depend on which). Each timed step is a full-batch step: forward over every training pair at its 3 positions,
cross-entropy (float32) at the last position only, backward, AdamW with train.betas, eps 1e-8 and
train.weight_decay on every parameter, no clipping, attograd's schedule (train.warmup linear, then constant).
The JSON line adds p, train_pairs and the last step's loss; tokens_per_s counts the 3 positions of each pair.
    OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=passive /usr/bin/python3 bench/torch_bench.py \
        configs/grokking.json --grokking --threads 2 --steps 50

With --decode, the model greedily continues a one-token prompt until it has read max_len tokens, one token
at a time with a key/value cache (PyTorch 1.13 has no cached decoding of its own: each layer's keys and
values go into preallocated tensors, and each step runs the one new position through the model's own
modules, attention by matmul and softmax over the cached rows), under torch.no_grad(), as attograd's
bench/decode_bench does; --steps repetitions (default 21), the median. The JSON line gives us_per_token
and tokens_per_s. A text config with --text --decode reads the text for its vocabulary.

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
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from reference_model import CausalLM, model_options  # noqa: E402

DEFAULT_TRAIN = {"steps": 3000, "batch_size": 64, "lr": 0.001, "warmup": 100, "schedule": "cosine",
                 "weight_decay": 0.01, "grad_clip": 1.0, "threads": 2, "eval_every": 250, "eval_size": 512}
DEFAULT_TEXT_TASK = {"unit": "char", "length": 8, "train_fraction": 0.0}
TEXT_TRAIN_FRACTION = 0.9  # train/tasks/text.cpp's default: the last 10% held out, as nanoGPT's shakespeare_char


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


def load_config(path, text=False, grokking=False):
    with open(path) as f:
        config = json.load(f)
    try:
        model = model_options(config.get("model", {}))
    except ValueError as e:
        sys.exit(f"{path}: {e}")
    task = config["task"]
    kind = "modadd_bare" if grokking else "text" if text else "random"
    if task.get("kind") != kind:
        hints = {"text": " (pass --text for a text config)",
                 "modadd_bare": " (pass --grokking for configs/grokking.json)"}
        hint = hints.get(task.get("kind"), "") if kind == "random" else ""
        sys.exit(f"{path}: /task/kind: expected \"{kind}\", got {task.get('kind')!r}{hint}")
    if text:
        task = {**DEFAULT_TEXT_TASK, **task}
    return {
        "name": config.get("name", os.path.splitext(os.path.basename(path))[0]),
        "seed": config.get("seed", 42),
        "task": task,
        "vocab": task.get("vocab"),  # a text task's vocabulary comes from its file (read_text)
        "seq_len": task["length"],
        "model": model,
        "train": {**DEFAULT_TRAIN, **config.get("train", {})},
    }


def read_text(task):
    """train/tasks/text.cpp's tokens: the file as ids into its sorted distinct characters (or bytes), and
    the first held-out position."""
    with open(task["path"], "rb") as f:
        data = f.read()
    units = list(data) if task["unit"] == "byte" else [ord(c) for c in data.decode("utf-8")]
    alphabet = sorted(set(units))
    index = {u: i for i, u in enumerate(alphabet)}
    ids = torch.tensor([index[u] for u in units], dtype=torch.long)
    fraction = task["train_fraction"] if task["train_fraction"] > 0 else TEXT_TRAIN_FRACTION
    cut = int(fraction * len(ids))
    window = task["length"] + 1
    if cut < window or len(ids) - cut < window:
        sys.exit(f"{task['path']}: {cut} training and {len(ids) - cut} held-out tokens; each side needs "
                 f"a window of task.length + 1 = {window}")
    return ids, len(alphabet), cut


def draw_windows(ids, begin, end, window, count, generator):
    """`count` windows of `window` tokens starting uniformly in [begin, end - window]: [count, window]."""
    starts = torch.randint(begin, end - window + 1, (count,), generator=generator)
    return ids[starts.unsqueeze(1) + torch.arange(window)]


def learning_rate(train, step):
    """train/optimizer.cpp's learning_rate: linear warmup, then constant or cosine to 10% of train.lr at
    the last step."""
    lr, warmup = train["lr"], train["warmup"]
    if step < warmup:
        return lr * (step + 1) / warmup
    if train["schedule"] == "constant":
        return lr
    span = max(1, train["steps"] - warmup - 1)
    progress = min(1.0, (step - warmup) / span)
    min_lr = 0.1 * lr
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))


def heldout_loss(model, windows, vocab, batch=50):
    """Mean cross-entropy over every position of the held-out windows ([n, T + 1])."""
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(windows), batch):
            chunk = windows[i:i + batch]
            logits = model(chunk[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, vocab), chunk[:, 1:].reshape(-1),
                                     reduction="sum").item()
    return total / (windows.shape[0] * (windows.shape[1] - 1))


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


def train_step(model, optimizer, params, inputs, targets, vocab, grad_clip):
    """One timed training step: forward, cross-entropy on every position, backward, clip, AdamW."""
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    return loss.item()


def bench_random(args, config, model, optimizer):
    """The random task: --steps timed steps after --warmup, at the config's constant lr."""
    train, vocab = config["train"], config["vocab"]
    batch, seq_len = train["batch_size"], config["seq_len"]
    params = list(model.parameters())
    steps = args.steps if args.steps is not None else 20
    step_seconds = []
    for step in range(args.warmup + steps):
        sequences = torch.randint(0, vocab, (batch, seq_len + 1))
        inputs, targets = sequences[:, :-1], sequences[:, 1:]
        start = time.perf_counter()
        if args.forward:
            with torch.no_grad():
                logits = model(inputs)
            check = logits[-1, -1, -1].item()
        else:
            check = train_step(model, optimizer, params, inputs, targets, vocab, train["grad_clip"])
        elapsed = time.perf_counter() - start
        if not math.isfinite(check):
            sys.exit(f"{args.config}: {'a logit' if args.forward else 'the loss'} became {check} at step {step}")
        if step >= args.warmup:
            step_seconds.append(elapsed)
    return step_seconds, {}


def train_text(args, config, model, optimizer, ids, cut):
    """The text task: a whole training run of train.steps (or --steps) with attograd's schedule, then the
    held-out loss. The first --warmup steps are left out of the timings."""
    train, vocab, seed = config["train"], config["vocab"], config["seed"]
    batch, window = train["batch_size"], config["seq_len"] + 1
    if args.steps is not None:
        train = {**train, "steps": args.steps}
    params = list(model.parameters())
    train_stream = torch.Generator().manual_seed(seed)
    eval_n = args.eval_n if args.eval_n is not None else train["eval_size"]
    heldout = draw_windows(ids, cut, len(ids), window, max(eval_n, train["eval_size"]),
                           torch.Generator().manual_seed(seed + 1))
    step_seconds, recent_losses = [], []
    run_start = time.perf_counter()
    for step in range(train["steps"]):
        sequences = draw_windows(ids, 0, cut, window, batch, train_stream)
        inputs, targets = sequences[:, :-1], sequences[:, 1:]
        lr = learning_rate(train, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        start = time.perf_counter()
        loss = train_step(model, optimizer, params, inputs, targets, vocab, train["grad_clip"])
        elapsed = time.perf_counter() - start
        if not math.isfinite(loss):
            sys.exit(f"{args.config}: the loss became {loss} at step {step}")
        if step >= args.warmup:
            step_seconds.append(elapsed)
        recent_losses = (recent_losses + [loss])[-50:]
        if (step + 1) % train["eval_every"] == 0 or step + 1 == train["steps"]:
            held = heldout_loss(model, heldout[:train["eval_size"]], vocab)
            print(f"step {step + 1}: loss {statistics.mean(recent_losses):.4f} (mean of the last "
                  f"{len(recent_losses)}), held-out {held:.4f}, lr {lr:.3g}, "
                  f"{(time.perf_counter() - run_start):.1f} s", file=sys.stderr)
    train_seconds = time.perf_counter() - run_start
    if not step_seconds:
        sys.exit(f"{args.config}: no timed steps ({train['steps']} steps, --warmup {args.warmup})")
    eval_loss = heldout_loss(model, heldout[:eval_n], vocab)
    return step_seconds, {
        "steps": train["steps"],
        "train_seconds": train_seconds,
        "train_loss_last50": statistics.mean(recent_losses),
        "eval_loss": eval_loss,
        "bits_per_token": eval_loss / math.log(2),
        "eval_n": eval_n,
        "vocab": vocab,
        "train_tokens": cut,
        "heldout_tokens": len(ids) - cut,
    }


def bench_grokking(args, config):
    """configs/grokking.json: full-batch steps of the config's model on a seeded training split."""
    task, m, train = config["task"], config["model"], config["train"]
    p = task["vocab"]
    if task.get("length", 2) != 2 or p % 2 == 0:
        sys.exit(f"{args.config}: --grokking needs task.length 2 and an odd task.vocab")
    if train.get("batch_size", 0) != 0 or train.get("grad_clip", 0) != 0 or train.get("decay") != "all":
        print("torch_bench: --grokking always runs full batch, no clipping, decay on every parameter",
              file=sys.stderr)
    n_train = round(task.get("train_fraction", 0.3) * p * p)
    order = torch.randperm(p * p, generator=torch.Generator().manual_seed(config["seed"]))[:n_train]
    a, b = order % p, order // p  # attograd's enumeration: index i is the pair (i % p, i // p)
    equals = 0  # token ids: "=" 0, value v is v + 1
    inputs = torch.stack([a + 1, b + 1, torch.full_like(a, equals)], dim=1)
    targets = (a + b) % p + 1
    vocab = p + 1
    model = CausalLM(m, vocab=vocab, max_len=3, fused_layer_norm=True)
    betas = tuple(train.get("betas", (0.9, 0.98)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=train["lr"], betas=betas, eps=1e-8,
                                  weight_decay=train["weight_decay"])
    steps = args.steps if args.steps is not None else 20
    step_seconds, loss = [], float("nan")
    for step in range(args.warmup + steps):
        lr = learning_rate({**train, "schedule": "constant"}, step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        start = time.perf_counter()
        logits = model(inputs)[:, -1]
        loss_t = F.cross_entropy(logits, targets)
        optimizer.zero_grad(set_to_none=True)
        loss_t.backward()
        optimizer.step()
        loss = loss_t.item()
        elapsed = time.perf_counter() - start
        if not math.isfinite(loss):
            sys.exit(f"{args.config}: the loss became {loss} at step {step}")
        if step >= args.warmup:
            step_seconds.append(elapsed)
    non_embedding = sum(prm.numel() for name, prm in model.named_parameters()
                        if not name.startswith(("tok_emb.", "pos_emb.")))
    flops = 6 * non_embedding * n_train * 3 + 12 * m["n_layers"] * 3 ** 2 * m["d_model"] * n_train
    return model, step_seconds, n_train * 3, flops, {"p": p, "train_pairs": n_train, "loss_last": loss}


def bench_decode(args, model, max_len):
    """Greedy cached decoding from the prompt [0] to max_len tokens: seconds per run, one per repetition."""
    d_model, n_heads = model.options["d_model"], model.options["n_heads"]
    dk = d_model // n_heads
    layers = len(model.blocks)

    def generate():
        keys = torch.empty(layers, n_heads, max_len, dk)
        values = torch.empty(layers, n_heads, max_len, dk)
        token = 0
        ids = [token]
        for t in range(max_len - 1):
            x = model.tok_emb.weight[token] + model.pos_emb.weight[t]  # (d_model,)
            for i, block in enumerate(model.blocks):
                attn = block.attn
                h = block.ln1(x) if block.ln1 is not None else x
                keys[i, :, t] = attn.wk(h).view(n_heads, dk)
                values[i, :, t] = attn.wv(h).view(n_heads, dk)
                q = attn.wq(h).view(n_heads, 1, dk)
                scores = q @ keys[i, :, :t + 1].transpose(-2, -1) / math.sqrt(dk)  # (H, 1, t + 1)
                z = torch.softmax(scores, dim=-1) @ values[i, :, :t + 1]  # (H, 1, dk)
                x = x + attn.wo(z.reshape(d_model))
                if block.mlp is not None:
                    x = x + block.mlp(block.ln2(x) if block.ln2 is not None else x)
            logits = model.lm_head(model.ln_f(x) if model.ln_f is not None else x)
            token = int(torch.argmax(logits))
            ids.append(token)
        return ids

    seconds = []
    with torch.no_grad():
        for _ in range(args.warmup):
            generate()
        for _ in range(args.steps or 21):
            start = time.perf_counter()
            generate()
            seconds.append(time.perf_counter() - start)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="bench config JSON (task.kind \"random\", or \"text\" with --text, or "
                                       "\"modadd_bare\" with --grokking)")
    parser.add_argument("--steps", type=int,
                        help="timed steps (default 20); with --text the training steps (default train.steps)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default 3)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: the config's train.threads)")
    parser.add_argument("--peak-gflops", type=float, help="machine peak (attograd's peak_fma_gflops), for mfu")
    parser.add_argument("--forward", action="store_true",
                        help="time forward passes under torch.no_grad() instead of training steps")
    parser.add_argument("--text", action="store_true",
                        help="a text config (configs/text.json): train it and report the held-out loss")
    parser.add_argument("--grokking", action="store_true",
                        help="configs/grokking.json: full-batch steps of Nanda et al.'s modular-addition model")
    parser.add_argument("--decode", action="store_true",
                        help="time greedy cached decoding (one token at a time) instead of training steps")
    parser.add_argument("--eval-n", type=int,
                        help="with --text: held-out windows of the final loss (default train.eval_size)")
    parser.add_argument("--allow-reference-blas", action="store_true",
                        help="run even when libblas.so.3 is not OpenBLAS (a warning instead of an error)")
    args = parser.parse_args()
    if (args.steps is not None and args.steps < 1) or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    if args.text and args.forward:
        parser.error("--text trains; it cannot be combined with --forward")
    if args.eval_n is not None and (not args.text or args.eval_n < 1):
        parser.error("--eval-n needs --text and must be >= 1")
    if args.decode and (args.forward or args.grokking):
        parser.error("--decode cannot be combined with --forward or --grokking")
    if args.grokking and (args.text or args.forward):
        parser.error("--grokking cannot be combined with --text or --forward")

    config = load_config(args.config, text=args.text, grokking=args.grokking)
    train, m = config["train"], config["model"]
    threads = args.threads if args.threads is not None else train["threads"]
    torch.set_num_threads(threads)
    set_blas_threads(threads, args.allow_reference_blas)
    torch.manual_seed(config["seed"])

    if args.grokking:
        model, step_seconds, tokens, flops, extra = bench_grokking(args, config)
        median = statistics.median(step_seconds)
        gflops_per_s = flops / median / 1e9
        print(json.dumps({
            "impl": "pytorch",
            "config": config["name"],
            "mode": "grokking",
            "threads": threads,
            "tokens_per_s": tokens / median,
            "step_ms_median": median * 1e3,
            "step_ms_min": min(step_seconds) * 1e3,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "params": sum(prm.numel() for prm in model.parameters()),
            "gflops_per_s": gflops_per_s,
            "mfu": gflops_per_s / args.peak_gflops if args.peak_gflops else None,
            **extra,
        }))
        return

    if args.text:
        ids, config["vocab"], cut = read_text(config["task"])
    batch, seq_len = train["batch_size"], config["seq_len"]
    vocab = max(config["vocab"], m.get("vocab") or 0)  # model.vocab / max_len: 0 = the task's
    max_len = max(seq_len, m.get("max_len") or 0)
    config["vocab"] = vocab
    model = CausalLM(m, vocab=vocab, max_len=max_len, fused_layer_norm=True)
    if args.decode:
        seconds = statistics.median(bench_decode(args, model, max_len))
        print(json.dumps({
            "impl": "pytorch",
            "config": config["name"],
            "mode": "decode",
            "threads": threads,
            "max_len": max_len,
            "tokens": max_len,
            "us_per_token": seconds / max_len * 1e6,
            "tokens_per_s": max_len / seconds,
            "params": sum(p.numel() for p in model.parameters()),
        }))
        return
    optimizer = make_optimizer(model, train)

    if args.text:
        step_seconds, extra = train_text(args, config, model, optimizer, ids, cut)
    else:
        step_seconds, extra = bench_random(args, config, model, optimizer)

    median = statistics.median(step_seconds)
    flops = model_flops_per_step(model, config) / (3 if args.forward else 1)
    gflops_per_s = flops / median / 1e9
    print(json.dumps({
        "impl": "pytorch",
        "config": config["name"],
        "mode": "text" if args.text else "forward" if args.forward else "train",
        "threads": threads,
        "tokens_per_s": batch * seq_len / median,
        "step_ms_median": median * 1e3,
        "step_ms_min": min(step_seconds) * 1e3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "params": sum(p.numel() for p in model.parameters()),
        "gflops_per_s": gflops_per_s,
        "mfu": gflops_per_s / args.peak_gflops if args.peak_gflops else None,
        **extra,
    }))

if __name__ == "__main__":
    main()
