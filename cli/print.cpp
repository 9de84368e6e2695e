#include "cli/print.h"

#include <cstdio>

#include "cli/commands.h"
#include "train/token_input.h"

namespace cli {

int print_output(bool json, const nlohmann::json& result, const std::string& header,
                 const std::vector<std::string>& notes, const std::string& table,
                 const std::vector<std::string>& wrote) {
  if (json) {
    std::printf("%s\n", result.dump().c_str());
    return 0;
  }
  std::printf("%s", header.c_str());
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  std::printf("%s", table.c_str());
  if (!wrote.empty()) {
    std::string line;
    for (size_t i = 0; i < wrote.size(); ++i)
      line += (i == 0 ? "" : i + 1 == wrote.size() ? " and " : ", ") + wrote[i];
    std::printf("\nwrote %s\n", line.c_str());
  }
  return 0;
}

void InputOptions::add_to(CLI::App* sub, const std::string& tokens_help, const std::string& ids_help) {
  auto* tokens = sub->add_option("--tokens", tokens_, tokens_help);
  auto* ids = sub->add_option("--ids", ids_, ids_help);
  auto* prompt = sub->add_option("--prompt", prompt_,
                                 "input as text, encoded by the run's tokenizer (text and pretrained tasks; "
                                 "BOS as for --tokens)");
  tokens->excludes(ids);
  prompt->excludes(tokens)->excludes(ids);
}

analysis::Sequence InputOptions::sequence(const std::string& tool, const analysis::StudyRun& run) const {
  if (!given()) throw UsageError(tool + ": give --prompt, --tokens or --ids");
  analysis::Sequence s;
  s.text = prompt_;
  s.tokens = tokens_;
  if (prompt_.empty() && tokens_.empty())
    for (int32_t id : train::parse_token_ids(static_cast<int>(run.model->shape.vocab), ids_, "--ids"))
      s.ids.push_back(id);
  return s;
}

void LayerHeadOptions::add_to(CLI::App* sub, const std::string& note) {
  layer_opt_ = add_number(sub, "--layer", layer_, "only this layer (from 0)" + note);
  head_opt_ = add_number(sub, "--head", head_, "only this head (from 0)" + note);
}

std::optional<int> LayerHeadOptions::layer() const {
  return layer_opt_->count() ? std::optional<int>(layer_) : std::nullopt;
}

std::optional<int> LayerHeadOptions::head() const {
  return head_opt_->count() ? std::optional<int>(head_) : std::nullopt;
}

CLI::Option* check_save_name(CLI::Option* save) {
  return save->check([](const std::string& n) {
    const std::string problem = analysis::save_name_problem(n);
    return problem.empty() ? problem : "NAME: " + problem;
  });
}

std::string run_title(const analysis::StudyRun& run) {
  return run.dir + " (step " + std::to_string(run.step) + ")";
}

std::string join_tokens(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

}  // namespace cli
