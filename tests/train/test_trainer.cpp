// The trainer end to end, in process (what a run folder holds with the study beside it:
// tests/runner/test_run_state.cpp): the same config gives the same bits (for any thread
// count), stopping at any step and resuming gives the same final loss and the same model bytes as an
// uninterrupted run, a NaN loss stops the run and keeps the last good
// checkpoint, and a truncated or corrupt checkpoint is refused with one line naming the file.
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>

#include "autograd/threads.h"
#include "common/temp_dir.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/safetensors.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace {

train::Config small_config(int threads) {
  return train::load_config(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/reverse.json",
                            {"model.d_model=16", "model.n_heads=2", "model.n_layers=2", "model.d_ff=32",
                             "train.steps=40", "train.batch_size=16", "train.warmup=5", "train.eval_every=20",
                             "train.log_every=5", "train.eval_size=32", "output.attention_every=10",
                             "output.checkpoint_every=15", "train.threads=" + std::to_string(threads)});
}

// Requests a stop once a given step has completed, as Ctrl-C does.
struct StopAt : train::TrainObserver {
  int64_t at;
  std::atomic<bool>& flag;
  StopAt(int64_t s, std::atomic<bool>& f) : at(s), flag(f) {}
  void on_step(const train::MetricsRecord& r, double) override {
    if (r.step == at) flag.store(true);
  }
};

std::vector<double> losses(const std::string& metrics) {
  std::vector<double> out;
  for (const auto& r : train::read_metrics_jsonl(metrics)) out.push_back(r.loss);
  return out;
}

std::vector<double> grad_norms(const std::string& metrics) {
  std::vector<double> out;
  for (const auto& r : train::read_metrics_jsonl(metrics)) out.push_back(r.grad_norm);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(same_config_seed_and_threads_give_bit_identical_losses) {
  for (int threads : {1, 2}) {
    testing::TempDir dir;
    train::train_model(small_config(threads), {dir.file("a"), false, nullptr, {}});
    train::train_model(small_config(threads), {dir.file("b"), false, nullptr, {}});
    BOOST_TEST(losses(dir.file("a/metrics.jsonl")) == losses(dir.file("b/metrics.jsonl")),
               boost::test_tools::per_element());
    BOOST_TEST(io::read_text_file(dir.file("a/checkpoint/model.safetensors")) ==
               io::read_text_file(dir.file("b/checkpoint/model.safetensors")));
  }
}

BOOST_AUTO_TEST_CASE(one_and_two_threads_give_the_same_bits) {
  // Every kernel sums each output element in an order fixed by the shapes alone (the GEMM by its blocking,
  // reductions per row or per column, the gradient norm per span), so the thread count changes nothing.
  // d_model 64 and 32 sequences: the projections (544 x 64 x 64) and the MLP are large enough to be split
  // over the threads, as are attention, GELU, AdamW and the gradient norm; a clip of 0.05 makes every
  // step's update depend on the norm's last bit.
  auto config = [](int threads) {
    return train::load_config(std::string(ATTOGRAD_SOURCE_DIR) + "/configs/reverse.json",
                              {"train.steps=20", "train.batch_size=32", "train.eval_every=20",
                               "train.log_every=2", "train.eval_size=32", "output.attention_every=20",
                               "output.checkpoint_every=20", "train.threads=" + std::to_string(threads)});
  };
  testing::TempDir dir;
  train::train_model(config(1), {dir.file("one"), false, nullptr, {}});
  train::train_model(config(2), {dir.file("two"), false, nullptr, {}});
  // And while other processes use the cores, when the pool runs small jobs on the caller alone.
  ag::detail::set_contention(ag::detail::Contention::kBusy);
  train::train_model(config(2), {dir.file("busy"), false, nullptr, {}});
  ag::detail::set_contention(ag::detail::Contention::kMeasured);
  const train::SafetensorsFile one = train::read_safetensors(dir.file("one/checkpoint/model.safetensors"));
  for (const char* other : {"two", "busy"}) {
    BOOST_TEST_CONTEXT(other) {
      const std::string run = dir.file(other);
      BOOST_TEST(losses(dir.file("one/metrics.jsonl")) == losses(run + "/metrics.jsonl"),
                 boost::test_tools::per_element());
      BOOST_TEST(grad_norms(dir.file("one/metrics.jsonl")) == grad_norms(run + "/metrics.jsonl"),
                 boost::test_tools::per_element());
      // The files' headers differ (they hold the resolved config, threads included); the tensors may not.
      const train::SafetensorsFile two = train::read_safetensors(run + "/checkpoint/model.safetensors");
      BOOST_REQUIRE_EQUAL(one.tensors.size(), two.tensors.size());
      for (size_t i = 0; i < one.tensors.size(); ++i) {
        BOOST_TEST(one.tensors[i].name == two.tensors[i].name);
        BOOST_TEST(one.tensors[i].data == two.tensors[i].data, one.tensors[i].name);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(stopping_at_any_step_and_resuming_equals_an_uninterrupted_run) {
  testing::TempDir dir;
  const train::Config config = small_config(2);
  const train::TrainResult full = train::train_model(config, {dir.file("full"), false, nullptr, {}});
  // Between checkpoints, at a checkpoint step, at an eval step, and right at the start.
  for (int64_t stop : {1, 15, 20, 27}) {
    const std::string run = dir.file("stopped-" + std::to_string(stop));
    std::atomic<bool> flag{false};
    StopAt observer(stop, flag);
    const train::TrainResult first = train::train_model(config, {run, false, &flag, {&observer}});
    BOOST_TEST(first.interrupted);
    BOOST_TEST(first.step == stop);
    const train::TrainResult resumed = train::train_model(config, {run, true, nullptr, {}});
    BOOST_TEST(resumed.step == 40);
    BOOST_TEST(resumed.last_loss == full.last_loss, "stopped at " << stop);
    BOOST_TEST(io::read_text_file(run + "/checkpoint/model.safetensors") ==
                   io::read_text_file(dir.file("full/checkpoint/model.safetensors")),
               "model bytes differ after stopping at " << stop);
    BOOST_TEST(losses(run + "/metrics.jsonl") == losses(dir.file("full/metrics.jsonl")),
               boost::test_tools::per_element());
  }
}

// train.optimizer "muon": its momentum is the optimizer checkpoint's first moment of each hidden matrix, so
// stopping and resuming gives the uninterrupted run's bytes; one and two threads give the same bits; and the
// hidden matrices move differently from AdamW's run (Muon updated them), while the rest follow AdamW.
BOOST_AUTO_TEST_CASE(muon_resumes_bit_exactly_and_is_the_same_bits_for_any_thread_count) {
  testing::TempDir dir;
  auto config = [](int threads) {
    train::Config c = small_config(threads);
    c.train.optimizer = "muon";
    return c;
  };
  const train::TrainResult full = train::train_model(config(2), {dir.file("full"), false, nullptr, {}});
  for (int64_t stop : {15, 27}) {
    const std::string run = dir.file("stopped-" + std::to_string(stop));
    std::atomic<bool> flag{false};
    StopAt observer(stop, flag);
    BOOST_TEST(train::train_model(config(2), {run, false, &flag, {&observer}}).interrupted);
    const train::TrainResult resumed = train::train_model(config(2), {run, true, nullptr, {}});
    BOOST_TEST(resumed.last_loss == full.last_loss, "stopped at " << stop);
    BOOST_TEST(io::read_text_file(run + "/checkpoint/model.safetensors") ==
                   io::read_text_file(dir.file("full/checkpoint/model.safetensors")),
               "model bytes differ after stopping at " << stop);
  }
  train::train_model(config(1), {dir.file("one"), false, nullptr, {}});
  const train::SafetensorsFile one = train::read_safetensors(dir.file("one/checkpoint/model.safetensors"));
  const train::SafetensorsFile two = train::read_safetensors(dir.file("full/checkpoint/model.safetensors"));
  BOOST_REQUIRE_EQUAL(one.tensors.size(), two.tensors.size());
  for (size_t i = 0; i < one.tensors.size(); ++i) BOOST_TEST(one.tensors[i].data == two.tensors[i].data);
  // Against AdamW from the same init: every tensor moved differently (the AdamW ones through the model).
  train::train_model(small_config(2), {dir.file("adamw"), false, nullptr, {}});
  const train::SafetensorsFile adamw =
      train::read_safetensors(dir.file("adamw/checkpoint/model.safetensors"));
  BOOST_TEST(adamw.find("blocks.0.attn.wq.weight")->data != two.find("blocks.0.attn.wq.weight")->data);
  BOOST_TEST(train::is_muon_matrix("blocks.0.mlp.fc1.weight", nn::ParamKind::kWeight, 2));
  BOOST_TEST(!train::is_muon_matrix("lm_head.weight", nn::ParamKind::kWeight, 2));
  BOOST_TEST(!train::is_muon_matrix("tok_emb.weight", nn::ParamKind::kEmbedding, 2));
  BOOST_TEST(!train::is_muon_matrix("blocks.0.mlp.fc1.bias", nn::ParamKind::kBias, 1));
}

// A finite dataset (modadd, half of its 121 pairs) in batches of 16 that straddle epochs, and in full
// batches: a step's batch follows from the seed and the step, so stopping anywhere and resuming gives the
// uninterrupted run's bytes.
BOOST_AUTO_TEST_CASE(a_finite_dataset_resumes_bit_exactly_in_epochs_and_in_full_batches) {
  for (const char* batch : {"train.batch_size=16", "train.batch_size=0"}) {
    testing::TempDir dir;
    const train::Config config = train::load_config(
        std::string(ATTOGRAD_SOURCE_DIR) + "/configs/modadd.json",
        {"task.vocab=11", "task.train_fraction=0.5", batch, "model.d_model=16", "model.n_heads=2",
         "model.n_layers=1", "model.d_ff=32", "train.steps=30", "train.warmup=5", "train.eval_every=10",
         "train.log_every=5", "output.attention_every=0", "output.checkpoint_every=10"});
    const train::TrainResult full = train::train_model(config, {dir.file("full"), false, nullptr, {}});
    for (int64_t stop : {3, 10, 17}) {
      const std::string run = dir.file("stopped-" + std::to_string(stop));
      std::atomic<bool> flag{false};
      StopAt observer(stop, flag);
      train::train_model(config, {run, false, &flag, {&observer}});
      const train::TrainResult resumed = train::train_model(config, {run, true, nullptr, {}});
      BOOST_TEST(resumed.last_loss == full.last_loss, batch << ", stopped at " << stop);
      BOOST_TEST(io::read_text_file(run + "/checkpoint/model.safetensors") ==
                     io::read_text_file(dir.file("full/checkpoint/model.safetensors")),
                 batch << ": model bytes differ after stopping at " << stop);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint) {
  testing::TempDir dir;
  // A learning rate this large blows the weights up within a few dozen steps.
  train::Config config = small_config(1);
  config.train.lr = 1e6;
  config.train.grad_clip = 0;
  config.train.warmup = 0;
  config.train.steps = 200;
  config.output.checkpoint_every = 1;
  try {
    train::train_model(config, {dir.file("run"), false, nullptr, {}});
    BOOST_FAIL("the run did not diverge");
  } catch (const train::TrainingDiverged& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("at step") != std::string::npos, what);
  }
  // The last checkpoint is loadable and holds finite weights.
  const train::Config stored = train::config_from_checkpoint(io::layout::model_checkpoint(dir.file("run")));
  BOOST_TEST(stored.train.lr == 1e6);
}

BOOST_AUTO_TEST_CASE(a_truncated_checkpoint_is_a_clear_error) {
  testing::TempDir dir;
  train::train_model(small_config(1), {dir.file("run"), false, nullptr, {}});
  const std::string path = io::layout::model_checkpoint(dir.file("run"));
  const std::string bytes = io::read_text_file(path);
  for (size_t cut : {size_t(4), size_t(100), bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      train::train_model(small_config(1), {dir.file("run"), true, nullptr, {}});
      BOOST_FAIL("a truncated checkpoint was accepted");
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      BOOST_TEST(what.rfind(path, 0) == 0, what);  // names the file first
      BOOST_TEST(what.find('\n') == std::string::npos, what);
    }
  }
}
