#include "analysis/tool.h"

#include <algorithm>

#include "analysis/run_study.h"
#include "autograd/threads.h"
#include "io/atomic_file.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "train/token_input.h"

namespace analysis {

StudyRun open_run(const std::string& dir) {
  StudyRun run = train::load_run(dir);
  ag::set_num_threads(std::min(run.config.train.threads, train::max_threads()));
  return run;
}

std::string bos_note(const StudyRun& run) {
  if (run.config.task.kind == "pretrained")
    return "(BOS " + run.task->token_name(*run.task->bos_id()) +
           " put in front, as the model's tokenizer and TransformerLens do; write it yourself to silence "
           "this)";
  return "(BOS put in front: every " + run.config.task.kind +
         " sequence starts with it; write it yourself to silence this)";
}

std::vector<int32_t> input_ids(const StudyRun& run, const Sequence& input, const std::string& field, Bos bos,
                               std::vector<std::string>* notes) {
  if (input.empty()) throw RequestError(field + ": expected text, token names or ids, got none");
  std::vector<int32_t> ids;
  if (!input.text.empty()) {
    std::optional<std::vector<int32_t>> encoded;
    try {
      encoded = run.task->encode_text(input.text);
    } catch (const std::invalid_argument& e) {
      throw RequestError(field + ": " + e.what());
    }
    ids = encoded ? std::move(*encoded) : train::parse_token_names(*run.task, input.text, field);
    if (ids.empty()) throw RequestError(field + ": the text encodes to no tokens");
    const std::optional<int> bos_id = run.task->bos_id();
    if (bos == Bos::kAdd && bos_id && ids.front() != *bos_id) {
      ids.insert(ids.begin(), *bos_id);
      const std::string note = bos_note(run);
      if (notes && std::find(notes->begin(), notes->end(), note) == notes->end()) notes->push_back(note);
    }
  } else if (!input.tokens.empty()) {
    bool bos_added = false;
    ids = bos == Bos::kAdd ? train::input_from_names(run, input.tokens, field, &bos_added)
                           : train::parse_token_names(*run.task, input.tokens, field);
    const std::string note = bos_note(run);
    if (bos_added && notes && std::find(notes->begin(), notes->end(), note) == notes->end())
      notes->push_back(note);
  } else {
    // The model's vocabulary, which may be larger than the task's: ids the task never uses are valid input.
    const int64_t vocab = run.model->shape.vocab;
    for (int64_t id : input.ids) {
      if (id < 0 || id >= vocab)
        throw RequestError(field + ": " + std::to_string(id) + " is not a token id in 0.." +
                           std::to_string(vocab - 1));
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  train::check_input_length(run, ids.size(), field);
  return ids;
}

train::Batch sequences_batch(const StudyRun& run, const std::vector<Sequence>& sequences,
                             const std::string& field, std::vector<std::string>* notes) {
  if (sequences.empty()) throw RequestError(field + ": expected at least one sequence, got none");
  train::Batch batch;
  // The task's sequence: T + 1 tokens, as Task::eval_set's rows are made from.
  const size_t whole = static_cast<size_t>(run.task->seq_len()) + 1;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "]";
    const Sequence& s = sequences[i];
    if (s.empty()) throw RequestError(where + ": expected token names or ids, got none");
    std::vector<int32_t> ids;
    if (!s.tokens.empty()) {
      ids = train::parse_token_names(*run.task, s.tokens, where);
      const std::optional<int> bos = run.task->token_id("BOS");
      if (bos && ids.front() != *bos) {
        ids.insert(ids.begin(), *bos);
        const std::string note = bos_note(run);
        if (notes && std::find(notes->begin(), notes->end(), note) == notes->end()) notes->push_back(note);
      }
    } else {
      const int64_t vocab = run.model->shape.vocab;
      for (int64_t id : s.ids) {
        if (id < 0 || id >= vocab)
          throw RequestError(where + ": " + std::to_string(id) + " is not a token id in 0.." +
                             std::to_string(vocab - 1));
        ids.push_back(static_cast<int32_t>(id));
      }
    }
    if (ids.size() != whole)
      throw RequestError(where + ": expected a whole sequence of the task, " + std::to_string(whole) +
                         " tokens (the model reads all but the last), got " + std::to_string(ids.size()));
    const std::vector<int> scored = run.task->scored_positions_of(ids);
    std::vector<int32_t> targets(whole - 1, -1);
    for (int t : scored)
      if (t >= 0 && static_cast<size_t>(t) + 1 < whole) targets[t] = ids[t + 1];
    batch.inputs.insert(batch.inputs.end(), ids.begin(), ids.end() - 1);
    batch.targets.insert(batch.targets.end(), targets.begin(), targets.end());
  }
  batch.B = static_cast<int>(sequences.size());
  batch.T = static_cast<int>(whole - 1);
  return batch;
}

int token_id(const StudyRun& run, const Token& token, const std::string& field) {
  if (token.name.empty()) {
    const int64_t vocab = run.model->shape.vocab;
    if (!token.id || *token.id < 0 || *token.id >= vocab)
      throw RequestError(field + ": token id " + (token.id ? std::to_string(*token.id) : "none") +
                         " is outside the vocabulary 0.." + std::to_string(vocab - 1));
    return static_cast<int>(*token.id);
  }
  if (const std::optional<int> id = run.task->token_id(token.name)) return *id;
  // Not a name: the text of one token, for a model that reads text (" the" is GPT-2's \sthe).
  std::optional<std::vector<int32_t>> ids;
  try {
    ids = run.task->encode_text(token.name);
  } catch (const std::invalid_argument&) {
    ids.reset();
  }
  if (ids && ids->size() == 1) return (*ids)[0];
  std::string hint;
  if (ids && !ids->empty()) {
    std::string pieces;
    for (int32_t id : *ids) pieces += (pieces.empty() ? "" : " ") + token_label(run, id);
    hint = " (as text it is " + std::to_string(ids->size()) + " tokens, " + pieces +
           "; give one token: its name or text, or its id)";
  }
  throw RequestError(field + ": unknown token '" + token.name + "'" + hint);
}

std::string token_label(const StudyRun& run, int id) {
  const train::Task& task = *run.task;
  return id >= 0 && id < task.vocab_size() ? task.token_name(id) : "<id " + std::to_string(id) + ">";
}

std::vector<std::string> token_labels(const StudyRun& run, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(token_label(run, id));
  return out;
}

void check_layer_head(const StudyRun& run, std::optional<int> layer, std::optional<int> head) {
  const int L = static_cast<int>(run.model->shape.n_layers);
  const int H = static_cast<int>(run.config.model.n_heads);
  if (layer && (*layer < 0 || *layer >= L))
    throw RequestError("layer " + std::to_string(*layer) + ": the model has " + std::to_string(L) +
                       (L == 1 ? " layer (valid: 0)" : " layers (valid: 0.." + std::to_string(L - 1) + ")"));
  if (head && (*head < 0 || *head >= H))
    throw RequestError("head " + std::to_string(*head) + ": the model has " + std::to_string(H) +
                       (H == 1 ? " head per layer (valid: 0)"
                               : " heads per layer (valid: 0.." + std::to_string(H - 1) + ")"));
}

std::vector<std::string> save_named(const StudyRun& run, const std::string& stem,
                                    const std::string& json_text, const std::string& svg) {
  const io::RunLock lock(run.dir);  // one writer per run folder
  io::write_text_file_atomically(stem + ".json", json_text);
  io::write_text_file_atomically(stem + ".svg", svg);
  write_run_report(run.dir, run.config.name);
  return {stem + ".json", stem + ".svg", io::layout::report_html(run.dir)};
}

std::string picture_title(const StudyRun& run, const std::string& what) {
  return run.config.name + ", step " + std::to_string(run.step) + ": " + what;
}

std::string save_name_problem(const std::string& name) {
  constexpr size_t kMaxSaveName = 100;  // NAME.json and NAME.svg stay well within a file name's 255 bytes
  if (name.size() > kMaxSaveName)
    return "at most " + std::to_string(kMaxSaveName) + " characters, got " + std::to_string(name.size());
  if (name.empty() ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos ||
      name[0] == '.')
    return "letters, digits, '_', '-' and '.' only";
  return "";
}

}  // namespace analysis
