#include "analysis/generate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "io/field_table.h"
#include "nn/generate.h"
#include "train/token_input.h"

namespace analysis {

namespace {

// --- How a task's text becomes ids and ids become text: the two places a task kind with its own notion
// of text (a character-level text task) plugs in. For the built-in tasks a prompt is token names separated
// by white space, and tokens are shown by name, separated by spaces.

// The ids of a prompt's text, before BOS is put in front.
std::vector<int32_t> prompt_ids(const train::Task& task, const std::string& text) {
  try {
    if (std::optional<std::vector<int32_t>> ids = task.encode_text(text)) return *ids;  // a text model
  } catch (const std::invalid_argument& e) {
    throw RequestError("prompt: " + std::string(e.what()));
  }
  return train::parse_token_names(task, text, "prompt");
}

// How the text output shows a run of tokens: a text model its text, the other kinds their token names
// joined by spaces.
std::string ids_text(const StudyRun& run, const std::vector<int32_t>& ids) {
  const train::Task& task = *run.task;
  if (std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id < task.vocab_size(); }))
    return task.decode(ids);
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + token_label(run, id);
  return out;
}

std::string shown(double x) {
  return std::isfinite(x) ? io::show_number(x) : std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

}  // namespace

Output<findings::GenerateResult> generate(StudyRun& run, const GenerateRequest& request) {
  if (request.max_new < -1 || request.max_new > kMaxNewTokens)
    throw RequestError("max_new " + std::to_string(request.max_new) + ": must be in 0.." +
                       std::to_string(kMaxNewTokens) + " (-1: until max_len)");
  if (!std::isfinite(request.temperature) || request.temperature < 0)
    throw RequestError("temperature " + shown(request.temperature) +
                       ": must be a finite number >= 0 (0 = greedy)");
  if (request.top_k < 0)
    throw RequestError("top_k " + std::to_string(request.top_k) + ": must be >= 0 (0 = every token)");
  if (request.prompt && !request.tokens.empty())
    throw RequestError("prompt: give prompt or tokens, not both");
  if (!request.prompt && request.tokens.empty()) throw RequestError("prompt: give prompt or tokens");

  Output<findings::GenerateResult> out;
  std::vector<int32_t> prompt;
  if (!request.prompt) {
    prompt =
        input_ids(run, request.tokens, "tokens", request.prepend_bos ? Bos::kAdd : Bos::kAsGiven, &out.notes);
  } else {
    prompt = prompt_ids(*run.task, *request.prompt);
    if (prompt.empty()) throw RequestError("prompt: expected at least one token");
    // As input_ids: every sequence of a task with BOS starts with it.
    const std::optional<int> bos = run.task->bos_id();
    if (request.prepend_bos && bos && prompt.front() != *bos) {
      prompt.insert(prompt.begin(), *bos);
      out.notes.push_back(bos_note(run));
    }
    train::check_input_length(run, prompt.size(), "prompt");
  }

  nn::GenerateOptions o;
  o.max_new = request.max_new;
  o.sampling.temperature = request.temperature;
  o.sampling.top_k = request.top_k;
  o.seed = request.seed;
  const nn::Generation g = nn::generate(*run.model, prompt, o);

  findings::GenerateResult& r = out.result;
  r.prompt = token_labels(run, prompt);
  r.generated = token_labels(run, g.ids);
  r.ids.assign(prompt.begin(), prompt.end());
  r.ids.insert(r.ids.end(), g.ids.begin(), g.ids.end());
  r.stopped = nn::stop_reason_name(g.stopped);
  r.prompt_text = ids_text(run, prompt);
  r.generated_text = ids_text(run, g.ids);
  r.max_len = run.model->shape.max_len;
  return out;
}

}  // namespace analysis
