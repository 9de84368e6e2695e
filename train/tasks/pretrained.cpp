// pretrained: the task of an imported model (docs/import.md), which has no data: its vocabulary and token
// names come from the byte-level BPE tokenizer at task.tokenizer (relative to the run folder: `attograd
// import` copies the model's tokenizer.json there, or vocab.json and merges.txt, named "."), text inputs
// are encoded by it and get its BOS (bos_id) put in front, and asking it for training or held-out
// sequences is a one-line error. T = task.length (the window a tool may ask for; the model's own limit is
// model.max_len).
#include <memory>
#include <string>

#include "train/tasks.h"
#include "train/tasks/data_file.h"

namespace train {
namespace tasks {
namespace {

constexpr int kMaxPretrainedLength = 1 << 20;

class PretrainedTask : public Task {
 public:
  PretrainedTask(const TaskConfig& config, std::shared_ptr<const Tokenizer> bpe)
      : Task(config, tokenizer_token_names(*bpe), config.length), bpe_(std::move(bpe)) {}

  std::optional<std::vector<int32_t>> encode_text(const std::string& text) const override {
    return bpe_->encode(text);
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return bpe_->decode(ids); }
  // The BOS its post-processor puts in front (Llama's <s>), else <|endoftext|> when the vocabulary has it:
  // GPT-2's, GPT-Neo's and Pythia's bos_token, which TransformerLens prepends (default_prepend_bos) although
  // their tokenizer.json adds none.
  std::optional<int> bos_id() const override {
    if (const std::optional<int32_t> bos = bpe_->bos_id()) return *bos;
    return token_id("<|endoftext|>");
  }
  const Tokenizer* tokenizer() const override { return bpe_.get(); }
  std::vector<int> scored_positions_of(const std::vector<int32_t>& sequence) const override {
    return range(0, static_cast<int>(sequence.size()) - 2);
  }
  std::vector<std::vector<int>> ideal_keys(const std::vector<int32_t>& inputs) const override {
    return std::vector<std::vector<int>>(inputs.size());
  }
  std::string describe() const override {
    return "pretrained: an imported model's task, " + std::to_string(vocab_size()) + " tokens of " +
           bpe_->source() + "; no data of its own (give inputs as --prompt, --tokens or --ids).";
  }

 protected:
  std::vector<int32_t> draw_sequence(ag::Rng&) const override { throw no_data(); }
  std::vector<int32_t> draw_from_split(ag::Rng&, bool) const override { throw no_data(); }

 private:
  static TaskDataError no_data() {
    return TaskDataError("kind",
                         "pretrained has no training or held-out data (an imported model's task); "
                         "train or evaluate with a text task (unit \"bpe\", the same tokenizer)");
  }
  std::shared_ptr<const Tokenizer> bpe_;
};

std::optional<TaskProblem> check_pretrained(const TaskConfig& config) {
  if (config.tokenizer.empty())
    return TaskProblem{"tokenizer", "pretrained reads its vocabulary from a tokenizer: set task.tokenizer"};
  if (!config.path.empty())
    return TaskProblem{"path", "pretrained has no data file (its tokens come from task.tokenizer)"};
  if (config.unit != "char")
    return TaskProblem{"unit", "pretrained's unit is its tokenizer's; leave task.unit out"};
  if (config.length < 1 || config.length > kMaxPretrainedLength)
    return TaskProblem{"length", "pretrained's window T must be in 1.." +
                                     std::to_string(kMaxPretrainedLength) + ", got " +
                                     std::to_string(config.length)};
  return std::nullopt;
}

}  // namespace

TaskKind pretrained_task() {
  TaskKind kind;
  kind.name = "pretrained";
  kind.format =
      "no data: an imported model's task, the tokens of task.tokenizer; T = length; scored: every "
      "position";
  kind.reads_file = true;
  kind.data_less = true;
  kind.check = check_pretrained;
  kind.log10_distinct_sequences = [](const TaskConfig&) { return 0.0; };
  kind.make = [](const TaskConfig& config) -> std::unique_ptr<Task> {
    return std::make_unique<PretrainedTask>(config, load_task_tokenizer(config.tokenizer, "tokenizer"));
  };
  return kind;
}

}  // namespace tasks
}  // namespace train
