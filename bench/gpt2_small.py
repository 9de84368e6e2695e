"""attograd against PyTorch 1.13 on a GPT-2-small-shaped model imported from a Hugging Face folder.

Writes a random-weight GPT-2 small folder in Hugging Face's layout (config.json: vocab 50257, n_positions
1024, 12 layers of d 768 and 12 heads, gelu_new, tied embeddings; model.safetensors, F32, transformers'
tensor names, 124,439,808 parameters, about 498 MB: written by hand, no safetensors package), imports it
with `attograd import` under /usr/bin/time -v (peak RSS against the file's size), then times, per thread
count, alternating attograd and PyTorch in separate processes (A B, then B A the next round):

- forward: one sequence of T = 128 ids (id i = (1 + 7919 i) mod 50257) to its (128, 50257) logits, without
  gradients; attograd's CausalLM::forward (as `attograd forward`), PyTorch's a GPT-2 forward written here
  from transformers' GPT2Model layout (Conv1D weights (in, out) by addmm, fused c_attn, explicit causal
  attention by matmul and softmax, F.layer_norm, the tanh GELU, the tied lm_head by F.linear);
- generate: greedy decoding of 128 tokens from the prompt [0] with a key/value cache: attograd's
  nn::generate (as `attograd generate --max-new 128 --temperature 0`), PyTorch's the same model one
  position at a time over preallocated key and value tensors (transformers' past_key_values, without its
  torch.cat per step).

Each process loads the model, warms up with one forward, then runs --reps (forward, generate) pairs (3 by
default: a process's first timed forward writes its outputs to fresh memory, which costs either side a
varying amount on a VM; the median of 3 leaves that out) and reports the medians (wall, and the process's
CPU time, user + system over its threads: on a machine shared with other work the CPU time says what each
side costs); a figure is the median of the rounds'. First, once, both sides' logits of the forward are
compared (max |difference| <= 1e-4) and their generated ids must be equal: the same computation on the
same weights.

    OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=passive /usr/bin/python3 bench/gpt2_small.py \\
        --build build --rounds 5 --threads 1 2

(PyTorch's best setting on an AVX-512 CPU, as bench/compare gives it; on an AVX2-only CPU
OPENBLAS_CORETYPE=Haswell.) Needs python3-torch and Debian's OpenBLAS (libopenblas0-pthread). Prints one
JSON line per (threads, round) on stderr and a summary JSON line on stdout.
"""

import argparse
import ctypes
import json
import math
import re
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257, "n_positions": 1024,
          "n_ctx": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": None,
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
          "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
          "tie_word_embeddings": True, "bos_token_id": 50256, "eos_token_id": 50256}
FORWARD_T = 128
MAX_NEW = 128


def forward_ids(t, vocab):
    return [(1 + 7919 * i) % vocab for i in range(t)]


def tensor_shapes(c):
    d, v, p, f = c["n_embd"], c["vocab_size"], c["n_positions"], 4 * c["n_embd"]
    shapes = {"wte.weight": (v, d), "wpe.weight": (p, d)}
    for i in range(c["n_layer"]):
        h = f"h.{i}."
        shapes.update({h + "ln_1.weight": (d,), h + "ln_1.bias": (d,),
                       h + "attn.c_attn.weight": (d, 3 * d), h + "attn.c_attn.bias": (3 * d,),
                       h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
                       h + "ln_2.weight": (d,), h + "ln_2.bias": (d,),
                       h + "mlp.c_fc.weight": (d, f), h + "mlp.c_fc.bias": (f,),
                       h + "mlp.c_proj.weight": (f, d), h + "mlp.c_proj.bias": (d,)})
    shapes.update({"ln_f.weight": (d,), "ln_f.bias": (d,)})
    return shapes


def write_folder(folder, seed):
    """config.json and model.safetensors (F32): weights N(0, 0.02), biases N(0, 0.02), norms' weights 1 +
    N(0, 0.02) and biases N(0, 0.02), written a tensor at a time."""
    import torch
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=1))
    shapes = tensor_shapes(CONFIG)
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    g = torch.Generator().manual_seed(seed)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for name, shape in shapes.items():
            t = torch.randn(shape, generator=g) * 0.02
            if re.search(r"ln_\w+\.weight$", name):
                t += 1
            f.write(t.numpy().tobytes())
    return sum(math.prod(s) for s in shapes.values())


def read_safetensors(path):
    import torch
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + a:8 + n + b]), dtype=torch.float32).view(h["shape"])
    return out


# ---- the PyTorch side (a worker process) ----

class TorchGPT2:
    """GPT-2 as transformers' GPT2LMHeadModel computes it, from its tensor names."""

    def __init__(self, w, c):
        self.w, self.c = w, c
        self.d, self.heads, self.layers = c["n_embd"], c["n_head"], c["n_layer"]
        self.dk = self.d // self.heads
        self.eps = c["layer_norm_epsilon"]

    def ln(self, x, name):
        import torch.nn.functional as F
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], self.eps)

    def conv1d(self, x, name):  # transformers' Conv1D: x W + b, W stored (in, out)
        import torch
        return torch.addmm(self.w[name + ".bias"], x, self.w[name + ".weight"])

    def mlp(self, x, h):
        import torch.nn.functional as F
        return self.conv1d(F.gelu(self.conv1d(x, h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")

    def forward(self, ids):
        import torch
        import torch.nn.functional as F
        T = len(ids)
        x = self.w["wte.weight"][ids] + self.w["wpe.weight"][:T]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for i in range(self.layers):
            h = f"h.{i}."
            qkv = self.conv1d(self.ln(x, h + "ln_1"), h + "attn.c_attn")
            q, k, v = (t.view(T, self.heads, self.dk).transpose(0, 1) for t in qkv.split(self.d, dim=1))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dk)
            scores = torch.where(causal, scores, torch.tensor(torch.finfo(scores.dtype).min))
            z = torch.matmul(scores.softmax(-1), v).transpose(0, 1).reshape(T, self.d)
            x = x + self.conv1d(z, h + "attn.c_proj")
            x = x + self.mlp(self.ln(x, h + "ln_2"), h)
        return F.linear(self.ln(x, "ln_f"), self.w["wte.weight"])

    def generate(self, prompt_token, max_new):
        """Greedy, one position at a time over preallocated keys and values."""
        import torch
        import torch.nn.functional as F
        L, H, dk, d = self.layers, self.heads, self.dk, self.d
        max_len = self.c["n_positions"]
        keys = torch.empty(L, H, max_len, dk)
        values = torch.empty(L, H, max_len, dk)
        token, out = prompt_token, []
        for t in range(max_new):
            x = (self.w["wte.weight"][token] + self.w["wpe.weight"][t]).view(1, d)
            for i in range(L):
                h = f"h.{i}."
                qkv = self.conv1d(self.ln(x, h + "ln_1"), h + "attn.c_attn")  # (1, 3d)
                q, k, v = qkv.view(3, H, dk)
                keys[i, :, t] = k
                values[i, :, t] = v
                scores = torch.matmul(q.view(H, 1, dk), keys[i, :, :t + 1].transpose(-1, -2)) / math.sqrt(dk)
                z = torch.matmul(scores.softmax(-1), values[i, :, :t + 1]).view(1, d)
                x = x + self.conv1d(z, h + "attn.c_proj")
                x = x + self.mlp(self.ln(x, h + "ln_2"), h)
            token = int(torch.argmax(F.linear(self.ln(x, "ln_f"), self.w["wte.weight"])))
            out.append(token)
        return out


def set_blas_threads(threads):
    try:
        ctypes.CDLL("libblas.so.3").openblas_set_num_threads(threads)
    except (OSError, AttributeError):
        sys.exit("gpt2_small: libblas.so.3 is not OpenBLAS: apt-get install libopenblas0-pthread")


def torch_worker(args):
    import torch
    torch.set_num_threads(args.threads)
    set_blas_threads(args.threads)
    folder = Path(args.torch_worker)
    c = json.loads((folder / "config.json").read_text())
    model = TorchGPT2(read_safetensors(folder / "model.safetensors"), c)
    ids = torch.tensor(forward_ids(FORWARD_T, c["vocab_size"]))
    fwd, gen, fwd_cpu, gen_cpu = [], [], [], []
    with torch.no_grad():
        logits = model.forward(ids)  # warm-up
        for _ in range(args.reps):
            start, cpu = time.perf_counter(), time.process_time()
            logits = model.forward(ids)
            fwd.append(time.perf_counter() - start)
            fwd_cpu.append(time.process_time() - cpu)
            start, cpu = time.perf_counter(), time.process_time()
            generated = model.generate(0, MAX_NEW)
            gen.append(time.perf_counter() - start)
            gen_cpu.append(time.process_time() - cpu)
    if args.dump:
        logits.contiguous().numpy().tofile(args.dump + ".logits")
        Path(args.dump + ".ids").write_text(" ".join(map(str, generated)) + "\n")
    g = statistics.median(gen)
    print(json.dumps({"side": "pytorch", "threads": args.threads, "reps": args.reps, "forward_t": FORWARD_T,
                      "forward_ms": 1e3 * statistics.median(fwd), "forward_cpu_ms": 1e3 * statistics.median(fwd_cpu),
                      "generated": len(generated), "generate_ms": 1e3 * g,
                      "generate_cpu_ms": 1e3 * statistics.median(gen_cpu), "tokens_per_s": len(generated) / g}))


# ---- the driver ----

def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def load_average():
    return float(Path("/proc/loadavg").read_text().split()[0])


def cpu_name():
    info = Path("/proc/cpuinfo").read_text()
    get = lambda key: re.search(rf"^{key}\s*:\s*(.*)$", info, re.M).group(1)  # noqa: E731
    return f"{get('model name')}, CPU family {get('cpu family')} model {get('model')}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the build folder (attograd, decode_bench)")
    parser.add_argument("--work", default="/tmp/attograd-gpt2-small", help="where the folders are written")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3, help="(forward, generate) pairs per process")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-check", action="store_true", help="no agreement check (already done)")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    parser.add_argument("--dump", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        args.threads = args.threads[0]
        return torch_worker(args)

    build, work = Path(args.build).resolve(), Path(args.work)
    src, run = work / "gpt2-small-hf", work / "gpt2-small-run"
    if not (src / "model.safetensors").exists():
        params = write_folder(src, args.seed)
        print(f"gpt2_small: wrote {src} ({params:,} parameters)", file=sys.stderr)
    file_bytes = (src / "model.safetensors").stat().st_size
    subprocess.run(["rm", "-rf", str(run)], check=True)
    start = time.perf_counter()
    timed = subprocess.run(["/usr/bin/time", "-v", str(build / "attograd"), "import", str(src), "--out",
                            str(run)], check=True, capture_output=True, text=True)
    import_s = time.perf_counter() - start
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr).group(1))
    summary = {"cpu": cpu_name(), "file_mb": file_bytes / 1e6, "import_peak_rss_mb": rss_kb * 1024 / 1e6,
               "import_rss_over_file": rss_kb * 1024 / file_bytes, "import_s": import_s}
    print(json.dumps(summary), file=sys.stderr)

    attograd = lambda t, extra=(): [str(build / "decode_bench"), "--run", str(run), "--threads", str(t),  # noqa: E731
                                    "--reps", str(args.reps), "--forward-t", str(FORWARD_T),
                                    "--max-new", str(MAX_NEW), *extra]
    pytorch = lambda t, extra=(): [sys.executable, __file__, "--torch-worker", str(src), "--threads", str(t),  # noqa: E731
                                   "--reps", str(args.reps), *extra]
    if not args.skip_check:
        import numpy as np
        a = run_json(attograd(args.threads[0], ["--dump", str(work / "attograd")]))
        p = run_json(pytorch(args.threads[0], ["--dump", str(work / "pytorch")]))
        la = np.fromfile(work / "attograd.logits", dtype=np.float32)
        lp = np.fromfile(work / "pytorch.logits", dtype=np.float32)
        ids_a = (work / "attograd.ids").read_text().split()
        ids_p = (work / "pytorch.ids").read_text().split()
        diff = float(np.abs(la - lp).max())
        summary.update({"logits_max_abs_diff": diff, "logits_max_abs": float(np.abs(lp).max()),
                        "generated_ids_equal": ids_a == ids_p})
        print(json.dumps({"check": summary, "attograd": a, "pytorch": p}), file=sys.stderr)
        if diff > 1e-4 or ids_a != ids_p:
            sys.exit(f"gpt2_small: the two sides disagree: max |logit difference| {diff}, ids equal "
                     f"{ids_a == ids_p}")

    results = {t: {"attograd": [], "pytorch": []} for t in args.threads}
    loads = []
    for r in range(args.rounds):
        for t in args.threads:
            order = ["attograd", "pytorch"] if r % 2 == 0 else ["pytorch", "attograd"]
            for side in order:
                loads.append(load_average())
                out = run_json(attograd(t) if side == "attograd" else pytorch(t))
                results[t][side].append(out)
                print(json.dumps({"round": r, "load": loads[-1], **out}), file=sys.stderr)
    for t in args.threads:
        keys = ("forward_ms", "generate_ms", "tokens_per_s", "forward_cpu_ms", "generate_cpu_ms")
        med = {side: {key: statistics.median(o[key] for o in results[t][side]) for key in keys}
               for side in results[t]}
        summary[f"threads_{t}"] = {
            **{f"{side}_{k}": round(v, 3) for side in med for k, v in med[side].items()},
            "forward_speedup": round(med["pytorch"]["forward_ms"] / med["attograd"]["forward_ms"], 3),
            "generate_speedup": round(med["pytorch"]["generate_ms"] / med["attograd"]["generate_ms"], 3),
            "forward_cpu_ratio": round(med["pytorch"]["forward_cpu_ms"] / med["attograd"]["forward_cpu_ms"], 3),
            "generate_cpu_ratio": round(med["pytorch"]["generate_cpu_ms"] / med["attograd"]["generate_cpu_ms"], 3)}
    summary["load_average_min_max"] = [min(loads), max(loads)] if loads else []
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
