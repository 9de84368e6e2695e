#include "cli/print.h"

#include <cstdio>
#include <sstream>

#include "cli/commands.h"

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

void InputOptions::add_to(CLI::App* sub, const std::string& tokens_help) {
  auto* tokens = sub->add_option("--tokens", tokens_, tokens_help);
  auto* ids = sub->add_option("--ids", ids_, "input as raw token ids, e.g. \"0 5 3 6\", taken as given");
  tokens->excludes(ids);
}

study::Sequence InputOptions::sequence(const std::string& tool) const {
  if (tokens_.empty() && ids_.empty()) throw UsageError(tool + ": give --tokens or --ids");
  study::Sequence s;
  s.tokens = tokens_;
  std::istringstream in(ids_);
  for (std::string word; in >> word;) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) throw UsageError("--ids: '" + word + "' is not an integer");
    s.ids.push_back(v);
  }
  if (s.empty()) throw UsageError(tool + ": --ids: expected at least one token id");
  return s;
}

CLI::Option* add_save_option(CLI::App* sub, std::string& name, const std::string& what) {
  return sub->add_option("--save", name, "also write " + what)->check([](const std::string& n) {
    const std::string problem = study::save_name_problem(n);
    return problem.empty() ? problem : "NAME: " + problem;
  });
}

std::string run_title(const study::StudyRun& run) {
  return run.dir + " (step " + std::to_string(run.step) + ")";
}

std::string join_tokens(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

}  // namespace cli
