// The optimiser checkpoint reader as `attograd train --resume` uses it, for a fixed small model (the
// config of the seed corpus): moments, step, Adam's step count and the data generator's state.
#include "fuzz/fuzz_common.h"
#include "train/checkpoint.h"
#include "train/model_factory.h"

namespace {

struct Fixture {
  train::Config config;
  std::unique_ptr<nn::CausalLM<float>> model;
  std::unique_ptr<train::AdamW> optimizer;
};

// Must match fuzz/corpus/safetensors_optimizer/*, written by scripts/fuzz's seed run.
Fixture make_fixture() {
  Fixture f;
  f.config.task.length = 3;
  f.config.model.d_model = 8;
  f.config.model.n_heads = 2;
  f.config.model.n_layers = 1;
  f.config.model.d_ff = 16;
  f.config = train::from_json(train::to_json(f.config));  // resolves max_len and vocab
  f.model = train::make_model<float>(f.config);
  std::vector<train::OptimParam> params;
  for (auto& p : f.model->named_parameters())
    params.push_back({p.name, p.tensor, train::uses_weight_decay(p.kind)});
  f.optimizer = std::make_unique<train::AdamW>(params, f.config.train.weight_decay);
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture = make_fixture();
  static const std::string path = fuzz::scratch_dir() + "/optimizer.safetensors";
  fuzz::write_file(path, data, size);
  ag::Rng rng(1);
  try {
    train::load_optimizer_checkpoint(path, *fixture.optimizer, rng, 2);
    // A loaded state must be usable: one more Adam step count without overflow, a generator that moves.
    if (fixture.optimizer->steps_taken() < 0 || fixture.optimizer->steps_taken() > 2) std::abort();
    const uint64_t a = rng.next_u64(), b = rng.next_u64();
    if (a == b && a == 0) std::abort();
  } catch (const std::exception& e) {
    fuzz::check_one_line(e);
  }
  return 0;
}
