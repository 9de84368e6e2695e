// attograd's side of the SAE training-step benchmark (bench/sae_bench.py is PyTorch's): times
// dictionary::SaeTrainer::step (TopK k 32: forward, loss, backward, AdamW, decoder renormalisation, fire
// counts) on a fixed set of activations, and prints one JSON line. With --write-x FILE it first writes those
// activations (synthetic sparse features, seeded) as a safetensors tensor "x" so the PyTorch side trains
// on the same numbers.
//   bench/sae_step [--d-in 256] [--d-sae 2048] [--batch 1024] [--steps 30] [--warmup 5] [--threads 2]
//                  [--write-x FILE]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "autograd/threads.h"
#include "autograd/timing.h"
#include "dictionary/sae.h"
#include "dictionary/sae_source.h"
#include "train/safetensors.h"

int main(int argc, char** argv) {
  int64_t d_in = 256, d_sae = 2048, batch = 1024, steps = 30, warmup = 5;
  int threads = 2;
  std::string write_x;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--d-in")
      d_in = std::atoll(v);
    else if (k == "--d-sae")
      d_sae = std::atoll(v);
    else if (k == "--batch")
      batch = std::atoll(v);
    else if (k == "--steps")
      steps = std::atoll(v);
    else if (k == "--warmup")
      warmup = std::atoll(v);
    else if (k == "--threads")
      threads = std::atoi(v);
    else if (k == "--write-x")
      write_x = v;
    else {
      std::fprintf(stderr, "sae_step: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  ag::set_num_threads(threads);
  // Activations: 4 * d_in sparse features in d_in dims, 8 batches cycled.
  const dictionary::SyntheticFeatures source(4 * d_in, d_in, 0.01, 7);
  std::vector<ag::Tensor<float>> xs;
  for (int b = 0; b < 8; ++b) xs.push_back(source.batch(b, batch));
  if (!write_x.empty()) {
    std::vector<float> all;
    for (const auto& x : xs) all.insert(all.end(), x.data(), x.data() + x.numel());
    train::write_safetensors(write_x, {{"x", {8 * batch, d_in}, all}}, {});
  }
  dictionary::SaeConfig c;
  c.d_sae = d_sae;
  c.batch_size = static_cast<int>(batch);
  c.steps = warmup + steps;
  c.resample_every = 0;
  c.warmup = 0;
  c.activation = dictionary::SaeActivation::topk;  // L0 = k from the first step, as after training
  c.k = 32;
  dictionary::SaeTrainer trainer(c, d_in, {});
  std::vector<double> seconds;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = ag::TimingClock::now();
    trainer.step(xs[s % 8]);
    if (s >= warmup) seconds.push_back(ag::seconds_since(t0));
  }
  const ag::TimingStats st = ag::timing_stats(seconds);
  std::printf(
      "{\"impl\": \"attograd\", \"d_in\": %lld, \"d_sae\": %lld, \"batch\": %lld, \"threads\": %d, "
      "\"step_ms_median\": %.3f, \"step_ms_min\": %.3f}\n",
      static_cast<long long>(d_in), static_cast<long long>(d_sae), static_cast<long long>(batch), threads,
      1e3 * st.median, 1e3 * st.min);
  return 0;
}
