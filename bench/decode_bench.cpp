// decode_bench: incremental decoding through the key/value cache against a full forward per token, not a
// test. For each model shape, nn::generate greedily continues a one-token prompt until the model has read
// max_len tokens (max_len - 1 new tokens read, max_len drawn), with the cache (each token one position's
// forward) and without (each token a full forward over the sequence so far), and prints the median time
// of each, the ratio, and microseconds per generated token. The cache's cost grows as N (attention's share
// as N^2 / 2 dot products of one query row), the full forwards' as N^2 (N forwards of up to N rows), so the
// ratio grows with max_len. Both paths give the same tokens (checked). A GPT-2-small-shaped model (124M
// parameters, max_len 128) runs cached only: its uncached path would take minutes.
// bench/torch_bench.py --decode times PyTorch's cached decoding of the same models (configs/text.json with
// --text, bench/configs/gpt2_small.json).
// Usage: decode_bench [--reps N] [--threads N] [--only NAME] (default 21 repetitions, 1 thread, every model;
// --only runs the models whose name starts with NAME)
// With --run RUN_DIR (an imported run, bench/gpt2_small.py): that run's model instead, timing the forward
// of T ids (--forward-t, default 128; id i = (1 + 7919 i) mod vocab, as gpt2_small.py) and the cached
// greedy generation of --max-new tokens (default 128) from the prompt [0], --reps times each, alternated;
// prints one JSON line (medians in ms, wall and the process's CPU time). --dump PREFIX writes the forward's
// logits (PREFIX.logits, float32, T x vocab) and the generated ids (PREFIX.ids, one line) for gpt2_small.py's
// agreement check.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/threads.h"
#include "autograd/timing.h"
#include "nn/generate.h"
#include "train/run_folder.h"

namespace {

struct Case {
  const char* name;
  nn::ModelShape shape;
  bool uncached = true;  // also time the uncached path
};

nn::ModelShape make(int64_t vocab, int64_t max_len, int64_t d_model, int64_t heads, int64_t layers,
                    int64_t d_ff, bool attention_only) {
  nn::ModelShape s;
  s.vocab = vocab;
  s.max_len = max_len;
  s.d_model = d_model;
  s.n_heads = heads;
  s.n_layers = layers;
  s.d_ff = d_ff;
  s.attention_only = attention_only;
  return s;
}

// Seconds of CPU time this process has used, all its threads (user + system).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The --run mode: an imported run's forward over T ids and its cached greedy generation.
int bench_run(const char* dir, int reps, int threads, int64_t t, int64_t max_new, const char* dump) {
  const train::LoadedRun run = train::load_run(dir);
  ag::set_num_threads(threads);  // after load_run, which may set the config's
  const nn::CausalLM<float>& model = *run.model;
  const int64_t vocab = model.shape.vocab;
  std::vector<int32_t> ids(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((1 + 7919 * i) % vocab);
  nn::GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new = max_new;
  ag::Tensor<float> logits;
  nn::Generation g;
  std::vector<double> forward_t, generate_t, forward_cpu, generate_cpu;
  {
    ag::NoGradScope no_grad;
    logits = model.forward(ids, 1, t);  // warm-up: first touch of the weights
  }
  for (int r = 0; r < reps; ++r) {
    double cpu = cpu_seconds();
    forward_t.push_back(ag::median(ag::time_runs(0, 1, [&] {
      ag::NoGradScope no_grad;
      logits = model.forward(ids, 1, t);
    })));
    forward_cpu.push_back(cpu_seconds() - cpu);
    cpu = cpu_seconds();
    generate_t.push_back(ag::median(ag::time_runs(0, 1, [&] { g = nn::generate(model, {0}, o); })));
    generate_cpu.push_back(cpu_seconds() - cpu);
  }
  if (dump[0]) {
    std::ofstream(std::string(dump) + ".logits", std::ios::binary)
        .write(reinterpret_cast<const char*>(logits.data()),
               static_cast<std::streamsize>(sizeof(float) * static_cast<size_t>(t * vocab)));
    std::ofstream out(std::string(dump) + ".ids");
    for (int32_t id : g.ids) out << id << ' ';
    out << '\n';
  }
  const double fwd = ag::median(forward_t), gen = ag::median(generate_t);
  std::printf(
      "{\"side\": \"attograd\", \"threads\": %d, \"reps\": %d, \"forward_t\": %lld, \"forward_ms\": %.3f, "
      "\"forward_cpu_ms\": %.3f, \"generated\": %zu, \"generate_ms\": %.3f, \"generate_cpu_ms\": %.3f, "
      "\"tokens_per_s\": %.3f}\n",
      threads, reps, static_cast<long long>(t), 1e3 * fwd, 1e3 * ag::median(forward_cpu), g.ids.size(),
      1e3 * gen, 1e3 * ag::median(generate_cpu), static_cast<double>(g.ids.size()) / gen);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 21, threads = 1;
  const char *only = "", *run = "", *dump = "";
  int64_t forward_t = 128, max_new = 128;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--run") == 0) run = argv[i + 1];
    if (std::strcmp(argv[i], "--dump") == 0) dump = argv[i + 1];
    if (std::strcmp(argv[i], "--forward-t") == 0) forward_t = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--max-new") == 0) max_new = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(3, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::max(1, std::atoi(argv[i + 1]));
  }
  ag::set_num_threads(threads);
  if (run[0]) {
    int reps_run = 3;
    for (int i = 1; i + 1 < argc; ++i)
      if (std::strcmp(argv[i], "--reps") == 0) reps_run = std::max(1, std::atoi(argv[i + 1]));
    return bench_run(run, reps_run, threads, forward_t, max_new, dump);
  }
  const std::vector<Case> cases = {
      // configs/induction.json: vocab 32 + BOS, length 16 (max_len 32), 2 attention-only layers of 4 heads;
      // then the same model with longer contexts, to show how each path grows with N.
      {"induction", make(33, 32, 32, 4, 2, 128, true)},
      {"induction, max_len 64", make(33, 64, 32, 4, 2, 128, true)},
      {"induction, max_len 128", make(33, 128, 32, 4, 2, 128, true)},
      {"induction, max_len 256", make(33, 256, 32, 4, 2, 128, true)},
      {"induction, max_len 512", make(33, 512, 32, 4, 2, 128, true)},
      // nanoGPT's CPU "baby GPT" shape: 4 layers, 4 heads, n_embd 128, block 64 (vocab 65 characters).
      {"baby GPT", make(65, 64, 128, 4, 4, 512, false)},
      {"baby GPT, max_len 256", make(65, 256, 128, 4, 4, 512, false)},
      // configs/text.json's model (its text has 93 distinct characters; windows of 64).
      {"text.json", make(93, 64, 128, 4, 4, 512, false)},
      // GPT-2 small's shape at a 128-token context (bench/configs/gpt2_small.json).
      {"GPT-2 small, max_len 128", make(50257, 128, 768, 12, 12, 3072, false), false},
  };
  std::printf("%-24s %8s %7s %12s %12s %8s %14s %14s\n", "model", "max_len", "tokens", "cached ms",
              "uncached ms", "ratio", "cached us/tok", "uncached us/tok");
  for (const Case& c : cases) {
    if (std::strncmp(c.name, only, std::strlen(only)) != 0) continue;
    ag::Rng rng(1);
    const nn::CausalLM<float> model(c.shape, rng);
    nn::GenerateOptions o;
    o.sampling.temperature = 0;
    const std::vector<int32_t> prompt = {0};
    nn::Generation cached_g, uncached_g;
    std::vector<double> cached_t, uncached_t;
    // Interleaved so drift in machine load hits both alike.
    for (int r = 0; r < (c.uncached ? reps : std::max(3, reps / 4)); ++r) {
      o.use_cache = true;
      cached_t.push_back(ag::median(ag::time_runs(0, 1, [&] { cached_g = nn::generate(model, prompt, o); })));
      if (!c.uncached) continue;
      o.use_cache = false;
      uncached_t.push_back(
          ag::median(ag::time_runs(0, 1, [&] { uncached_g = nn::generate(model, prompt, o); })));
    }
    if (!c.uncached) {
      const double cached = ag::median(cached_t), n = static_cast<double>(cached_g.ids.size());
      std::printf("%-24s %8lld %7zu %12.3f %12s %8s %14.1f %14s\n", c.name,
                  static_cast<long long>(c.shape.max_len), cached_g.ids.size(), 1e3 * cached, "-", "-",
                  1e6 * cached / n, "-");
      continue;
    }
    if (cached_g.ids != uncached_g.ids) {
      std::fprintf(stderr, "decode_bench: %s: the cached and uncached tokens differ\n", c.name);
      return 1;
    }
    const double cached = ag::median(cached_t), uncached = ag::median(uncached_t);
    const double n = static_cast<double>(cached_g.ids.size());
    std::printf("%-24s %8lld %7zu %12.3f %12.3f %7.1fx %14.1f %14.1f\n", c.name,
                static_cast<long long>(c.shape.max_len), cached_g.ids.size(), 1e3 * cached, 1e3 * uncached,
                uncached / cached, 1e6 * cached / n, 1e6 * uncached / n);
  }
  return 0;
}
