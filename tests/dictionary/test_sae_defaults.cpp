// The SAE's default config on every committed config's MLP (dictionary/sae.h, docs/sae.md): explained
// variance >= 0.8 at every layer's blocks.L.mlp.post on short runs. Its own test program: it trains a model
// per config, the longest work of the SAE tests, so it has its own time budget. ctest runs it as two shares
// side by side ("-- --share=I/N": the I-th of N shares of the configs; without it, every config): under
// ASan + UBSan the whole would be the suite's longest test, alone on one core (CMakeLists.txt).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/temp_dir.h"
#include "dictionary/sae.h"
#include "dictionary/sae_eval.h"
#include "dictionary/sae_source.h"
#include "train/run_folder.h"
#include "train/trainer.h"

namespace {

// This run's share of the configs: "--share=I/N" after Boost.Test's "--", else the whole (1 of 1).
std::pair<int, int> share_of_run() {
  const auto& suite = boost::unit_test::framework::master_test_suite();
  int index = 1, count = 1;
  for (int i = 1; i < suite.argc; ++i) {
    const std::string arg = suite.argv[i];
    BOOST_TEST_REQUIRE(arg.rfind("--share=", 0) == 0u, "unknown argument " << arg << " (--share=I/N)");
    const size_t slash = arg.find('/');
    BOOST_TEST_REQUIRE(slash != std::string::npos, "--share=I/N, got " << arg);
    index = std::stoi(arg.substr(8, slash - 8));
    count = std::stoi(arg.substr(slash + 1));
  }
  BOOST_TEST_REQUIRE((count >= 1 && index >= 1 && index <= count), "--share=I/N with 1 <= I <= N");
  return {index, count};
}

}  // namespace

// The default config explains the MLP of every committed config that has one: on each config's model
// (narrowed to d_model 32, d_ff 64 and trained 100 steps with AdamW, so the test takes seconds), an SAE with
// every default but a shorter training (400 steps of 256 tokens) reaches explained variance >= 0.8 at every
// layer's blocks.L.mlp.post.
BOOST_AUTO_TEST_CASE(default_config_explains_every_committed_mlp) {
  // The configs with an MLP and their layer counts, by name; the shares split them by layers (each layer is
  // an SAE to train), largest first onto the share with the fewest so far, the same split on every run.
  std::vector<std::pair<std::string, int>> configs;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(ATTOGRAD_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    const train::Config config = train::load_config(entry.path().string());
    if (!config.model.attention_only)
      configs.emplace_back(entry.path().stem().string(), config.model.n_layers);
  }
  std::sort(configs.begin(), configs.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  int total = 0;
  for (const auto& c : configs) total += c.second;
  BOOST_TEST(total >= 8);  // the points checked over all shares
  const auto [share, shares] = share_of_run();
  std::vector<int> layers_in(static_cast<size_t>(shares), 0);
  std::vector<std::string> mine;
  int expected = 0;
  for (const auto& [name, n_layers] : configs) {
    const size_t to =
        static_cast<size_t>(std::min_element(layers_in.begin(), layers_in.end()) - layers_in.begin());
    layers_in[to] += n_layers;
    if (static_cast<int>(to) + 1 != share) continue;
    mine.push_back(name);
    expected += n_layers;
  }
  BOOST_TEST_REQUIRE(!mine.empty(), "share " << share << " of " << shares << " has no config");

  testing::TempDir tmp;
  int checked = 0;
  for (const std::string& name : mine) {
    const std::string path = std::string(ATTOGRAD_SOURCE_DIR) + "/configs/" + name + ".json";
    const train::Config config = train::load_config(
        path, {"model.d_model=32", "model.n_heads=2", "model.d_ff=64", "train.steps=100",
               "train.optimizer=adamw", "train.warmup=5", "train.eval_every=10000", "train.eval_size=32",
               "output.attention_every=0", "output.checkpoint_every=10000"});
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
  BOOST_TEST(checked == expected);
}
