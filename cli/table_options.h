// A study tool's options built from its request's field table (study/fields.h), or from its row in
// study::tools() for a command made from the row alone (cli/tool_command.cpp): one option per row, spelled
// "--" + the key with "_" as "-", with the row's meaning as its help and the request's default shown, a
// number read by add_number with the row's range, a bool as a flag, a string with a choice checked against
// its choices. The Python module binds the same rows, so the two front ends take the same fields with the
// same defaults (tests/cli/test_contract.cpp holds them, and docs/cli.md, to each other).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "cli/print.h"
#include "io/field_table.h"
#include "study/tools.h"

namespace cli {

// How a command spells one row when not as the table says: other names ("-j,--jobs", or a positional's
// "CONFIG"), other help, or a number's narrower range. Each is kept from before the tables drove the options,
// so that no user sees a flag change.
struct Spelling {
  Spelling() = default;
  Spelling(std::string names_, std::string help_ = "") : names(std::move(names_)), help(std::move(help_)) {}
  // A number's range as the command line accepts it, instead of the row's.
  Spelling(std::string names_, std::string help_, io::Valid range)
      : names(std::move(names_)), help(std::move(help_)), narrower(true), valid(std::move(range)) {}

  std::string names;  // "" = "--" + key with "_" as "-"
  std::string help;   // "" = the row's meaning
  bool narrower = false;
  io::Valid valid;
};
using Spellings = std::map<std::string, Spelling>;

// "--" + key with "_" as "-": "node_threshold" is "--node-threshold".
inline std::string option_name(const std::string& key) {
  std::string name = "--" + key;
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

// The help of a row's option: `meaning`, then the default as study::shown_default gives it.
inline std::string row_help(std::string meaning, const io::FieldInfo& row) {
  const std::string shown = study::shown_default(row);
  if (!shown.empty()) meaning += " (default: " + shown + ")";
  return meaning;
}

// One option for one value of a row, by the value's type: a bool as a flag, a number through add_number
// with `valid`'s range, a string (or list of strings) with `valid`'s choices checked. What both the typed
// tables (add_table_options) and a command made from a tool's row (add_row_options) register.
template <typename V>
CLI::Option* add_value_option(CLI::App* sub, const std::string& names, V& value, const std::string& help,
                              const io::Valid& valid, const io::FieldInfo& row) {
  if constexpr (std::is_same_v<V, bool>) {
    return sub->add_flag(names, value, help);
  } else if constexpr (std::is_arithmetic_v<V>) {
    return add_number(sub, names, value, help, valid);
  } else if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, std::vector<std::string>>) {
    CLI::Option* option = sub->add_option(names, value, help);
    if (valid.kind == io::Valid::kOneOf) option->check(CLI::IsMember(valid.choices));
    return option;
  } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
    V* target = &value;
    return sub->add_option_function<std::string>(
        names, [target](const std::string& text) { *target = text; }, help);
  } else {
    throw std::logic_error(row.path + ": no command-line option for a " + row.type + " field");
  }
}

// One option per row of `table` (but the rows in `leave_out`, which the command registers its own way),
// reading into `request`, whose values are the defaults shown. Returns the options by key, for a command's
// ->required(), ->needs(), ->excludes().
template <typename R>
std::map<std::string, CLI::Option*> add_table_options(CLI::App* sub, const io::Table<R>& table, R& request,
                                                      const Spellings& spellings = {},
                                                      const std::set<std::string>& leave_out = {}) {
  std::vector<io::FieldInfo> rows;
  io::add_field_infos(rows, "", table, request);
  std::map<std::string, CLI::Option*> added;
  for (size_t i = 0; i < table.size(); ++i) {
    const io::Field<R>& field = table[i];
    if (leave_out.count(field.key)) continue;
    const auto found = spellings.find(field.key);
    const Spelling spelling = found == spellings.end() ? Spelling() : found->second;
    const std::string names = spelling.names.empty() ? option_name(field.key) : spelling.names;
    const std::string help =
        row_help(spelling.help.empty() ? std::string(field.meaning) : spelling.help, rows[i]);
    const io::Valid valid = spelling.narrower ? spelling.valid : field.valid;
    added[field.key] = std::visit(
        [&](const auto& member) -> CLI::Option* {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_same_v<M, io::Named<R>>) {
            R* target = &request;
            const io::Named<R> named = member;
            return sub
                ->add_option_function<std::string>(
                    names, [target, named](const std::string& text) { named.set(*target, text); }, help)
                ->check(CLI::IsMember(named.names));
          } else {
            return add_value_option(sub, names, request.*member, help, valid, rows[i]);
          }
        },
        field.member);
  }
  return added;
}

// One option per row of a tool that has no hand-written command (its `rows` and `valid`, built from its
// table), as add_table_options would give its request: the same names, help, defaults shown, ranges and
// choices. Returns what puts the values given into the request's JSON (a row left out keeps the request's
// default).
inline std::function<void(nlohmann::json&)> add_row_options(CLI::App* sub, const study::Tool& tool) {
  std::vector<std::function<void(nlohmann::json&)>> fills;
  for (size_t i = 0; i < tool.rows.size(); ++i) {
    const io::FieldInfo& row = tool.rows[i];
    const std::string help = row_help(row.meaning, row);
    const auto add = [&](auto typed) {
      using V = decltype(typed);
      auto value = std::make_shared<V>();
      CLI::Option* option = add_value_option(sub, option_name(row.path), *value, help, tool.valid.at(i), row);
      fills.push_back([option, value, key = row.path](nlohmann::json& request) {
        if (option->count() == 0) return;
        if constexpr (std::is_same_v<V, std::optional<std::string>>) {
          request[key] = value->value();
        } else {
          request[key] = *value;
        }
      });
    };
    if (row.type == "boolean") {
      add(bool());
    } else if (row.type == "integer") {
      add(int64_t());
    } else if (row.type == "number") {
      add(double());
    } else if (row.type == "string") {
      add(std::string());
    } else if (row.type == "array of strings") {
      add(std::vector<std::string>());
    } else if (row.type == "string or null") {
      add(std::optional<std::string>());
    } else {
      throw std::logic_error(tool.name + "." + row.path + ": no command-line option for a " + row.type +
                             " field");
    }
  }
  return [fills](nlohmann::json& request) {
    for (const auto& fill : fills) fill(request);
  };
}

}  // namespace cli
