// What every command shares after its call: printing a tool's result (one JSON line with --json, else the
// text and the files it wrote), and the flags several tools take the same way (an input as --tokens or
// --ids, --save NAME). Nothing here computes: the tools are in the study's rooms (study/tools.h lists them).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "analysis/tool.h"
#include "io/number_text.h"

namespace cli {

// With `json`, the result's JSON on one line; otherwise `header`, the tool's notes, `table` and, when
// files were written, a line "wrote A, B and C". Returns 0, the exit code.
int print_output(bool json, const nlohmann::json& result, const std::string& header,
                 const std::vector<std::string>& notes, const std::string& table,
                 const std::vector<std::string>& wrote);
template <typename Result>
int print_output(bool json, const analysis::Output<Result>& out, const nlohmann::json& result,
                 const std::string& header, const std::string& table) {
  return print_output(json, result, header, out.notes, table, out.wrote);
}

// A number option: its value read by the one parser of its type (io/number_text.h), so that empty text,
// NaN, infinities, overflow, fractions for integers and values outside `valid` are refused in one line
// "--NAME: what" (exit 2), nothing clamped or wrapped. Every number a command takes is registered here.
template <typename T>
CLI::Option* add_number(CLI::App* sub, const std::string& name, T& value, const std::string& help,
                        const io::Valid& valid = io::Valid()) {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t> ||
                    std::is_same_v<T, double>,
                "add_number takes int, int64_t, uint64_t or double");
  CLI::Validator checked(
      [valid](std::string& text) {
        T parsed{};
        const std::string problem = io::parse_number(text, parsed, valid);
        if (!problem.empty()) return problem;
        // CLI11 converts the text again after this: give it the value in plain decimal (it would read
        // "010" as octal).
        if constexpr (std::is_same_v<T, double>) {
          text = io::show_number(parsed);
        } else {
          text = std::to_string(parsed);
        }
        return std::string();
      },
      valid.kind == io::Valid::kRange ? io::range_text(valid) : "", "number");
  return sub->add_option(name, value, help)->transform(checked);
}

// --tokens "BOS 3 1 4" and --ids "0 5 3 6" (exclusive) into a analysis::Sequence. `tokens_help` says what
// the tool does with names (BOS added or not).
class InputOptions {
 public:
  static constexpr const char* kIdsHelp = "input as raw token ids, e.g. \"0 5 3 6\", taken as given";
  void add_to(CLI::App* sub, const std::string& tokens_help, const std::string& ids_help = kIdsHelp);
  // The input given; UsageError when no flag was given. --ids words are plain decimal ids of the run's
  // task ("--ids: '+3' is not a token id in 0..11" otherwise); --prompt is text for the run's tokenizer.
  analysis::Sequence sequence(const std::string& tool, const analysis::StudyRun& run) const;
  // Whether any flag was given (to say so before opening the run).
  bool given() const { return !prompt_.empty() || !tokens_.empty() || !ids_.empty(); }

 private:
  std::string prompt_, tokens_, ids_;
};

// --layer L and --head H, each unset when the command line leaves it out.
class LayerHeadOptions {
 public:
  // Registers both on `sub`; `note` ends both help texts.
  void add_to(CLI::App* sub, const std::string& note = "");
  std::optional<int> layer() const;
  std::optional<int> head() const;

 private:
  int layer_ = 0, head_ = 0;
  CLI::Option *layer_opt_ = nullptr, *head_opt_ = nullptr;
};

// A --save NAME option checked as the tools check it (analysis::save_name_problem).
CLI::Option* check_save_name(CLI::Option* save);

// "RUN (step N)": how every command names the run it read.
std::string run_title(const analysis::StudyRun& run);

// Token names separated by single spaces.
std::string join_tokens(const std::vector<std::string>& tokens);

}  // namespace cli
