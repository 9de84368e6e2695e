// The SAE's default config on every committed config's MLP (dictionary/sae.h, docs/sae.md): explained
// variance
// >= 0.8 at every layer's blocks.L.mlp.post on short runs. Its own test program: it trains a model per
// config, the longest work of the SAE tests, so it has its own time budget.
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>

#include "common/temp_dir.h"
#include "dictionary/sae.h"
#include "dictionary/sae_eval.h"
#include "dictionary/sae_source.h"
#include "train/run_folder.h"
#include "train/trainer.h"

// The default config explains the MLP of every committed config that has one: on each config's model
// (narrowed to d_model 32, d_ff 64 and trained 100 steps with AdamW, so the test takes seconds), an SAE with
// every default but a shorter training (400 steps of 256 tokens) reaches explained variance >= 0.8 at every
// layer's blocks.L.mlp.post.
BOOST_AUTO_TEST_CASE(default_config_explains_every_committed_mlp) {
  testing::TempDir tmp;
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(ATTOGRAD_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().stem().string();
    if (train::load_config(entry.path().string()).model.attention_only) continue;
    const train::Config config = train::load_config(
        entry.path().string(),
        {"model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.steps=100", "train.optimizer=adamw",
         "train.warmup=5", "train.eval_every=10000", "train.eval_size=32", "output.attention_every=0",
         "output.checkpoint_every=10000"});
    train::train_model(config, {tmp.file(name), false, nullptr, {}});
    const train::LoadedRun run = train::load_run(tmp.file(name));
    dictionary::SaeConfig c;
    c.steps = 400;
    c.batch_size = 256;
    c.buffer_tokens = 8192;
    c.eval_sequences = 32;
    const train::Batch held_out = run.task->eval_set(run.config.seed, c.eval_sequences);
    for (int layer = 0; layer < config.model.n_layers; ++layer) {
      const std::string point = "blocks." + std::to_string(layer) + ".mlp.post";
      dictionary::ModelActivations source(*run.model, *run.task, point, c);
      dictionary::SaeTrainer trainer(c, source.d_in(), source.mean(), source.norm_scale());
      for (int64_t step = 0; step < c.steps; ++step) trainer.step(source.batch(step));
      const dictionary::SaeEval e =
          dictionary::evaluate_sae(*run.model, *run.task, trainer.raw_params(), c, point, held_out, nullptr);
      BOOST_TEST(e.explained_variance >= 0.8,
                 name << " " << point << ": explained variance " << e.explained_variance << ", L0 " << e.l0);
      BOOST_TEST_MESSAGE(name << " " << point << ": explained variance " << e.explained_variance << ", L0 "
                              << e.l0 << ", CE recovered " << e.ce_loss_recovered);
      ++checked;
    }
  }
  BOOST_TEST(checked >= 8);
}
