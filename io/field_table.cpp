#include "io/field_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "io/number_text.h"
#include "io/printable.h"

namespace io {

using nlohmann::json;

void field_fail(const std::string& pointer, const std::string& message) {
  throw FieldProblem{pointer, message};
}

JsonError field_error(const std::string& source, const FieldProblem& problem) {
  return JsonError(printable(source + ": " + shown(problem.pointer) + ": " + problem.message));
}

Valid at_least(double low, std::string note) {
  Valid valid;
  valid.kind = Valid::kRange;
  valid.low = low;
  valid.note = std::move(note);
  return valid;
}

Valid above(double low) {
  Valid valid = at_least(low);
  valid.low_inclusive = false;
  return valid;
}

Valid not_empty() {
  Valid valid;
  valid.kind = Valid::kNotEmpty;
  return valid;
}

Valid one_of(std::vector<std::string> choices) {
  Valid valid;
  valid.kind = Valid::kOneOf;
  valid.choices = std::move(choices);
  return valid;
}

Valid rule(std::string note) {
  Valid valid;
  valid.note = std::move(note);
  return valid;
}

std::string shown(const std::string& pointer) {
  return pointer.empty() ? "/" : pointer;
}

std::string escape_key(const std::string& key) {
  std::string escaped;
  for (char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string child(const std::string& pointer, const std::string& key) {
  return pointer + "/" + escape_key(key);
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string: {
      // Bytes that are not UTF-8 (from a --set value) would make dump() throw: show them as U+FFFD.
      std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
      if (text.size() > 40) text = text.substr(0, 37) + "...\"";
      return "string " + text;
    }
    default:
      return value.dump();  // numbers, true, false, null
  }
}

std::string show_number(double x) {
  std::string text = json(x).dump();
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

std::string choices_text(const std::vector<std::string>& choices, const std::string& quote) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + quote + choices[i] + quote;
  }
  return text;
}

std::string range_text(const Valid& valid) {
  std::string text = (valid.low_inclusive ? ">= " : "> ") + show_number(valid.low);
  if (valid.has_high) text += (valid.high_inclusive ? " and <= " : " and < ") + show_number(valid.high);
  return text;
}

std::string valid_text(const Valid& valid) {
  std::string text;
  if (valid.kind == Valid::kRange) text = range_text(valid);
  if (valid.kind == Valid::kNotEmpty) text = "not empty";
  if (valid.kind == Valid::kOneOf) text = choices_text(valid.choices, "`");
  if (!valid.note.empty()) text += (text.empty() ? "" : ", ") + valid.note;
  return text.empty() ? "any" : text;
}

namespace {

// An integer of type Integer, or a FieldProblem at `pointer`.
template <typename Integer>
Integer integer_of(const json& value, const std::string& pointer) {
  if (!value.is_number_integer()) field_fail(pointer, "expected an integer, got " + describe(value));
  using Limits = std::numeric_limits<Integer>;
  const bool fits = value.is_number_unsigned()
                        ? value.get<uint64_t>() <= static_cast<uint64_t>(Limits::max())
                        : value.get<int64_t>() >= Limits::min() && value.get<int64_t>() <= Limits::max();
  if (!fits) field_fail(pointer, "integer out of range, got " + describe(value));
  return value.get<Integer>();
}

// A string of UTF-8 text without control bytes, or a FieldProblem at `pointer`: strings go into files,
// file names and terminal lines.
std::string text_of(const json& value, const std::string& pointer) {
  if (!value.is_string()) field_fail(pointer, "expected a string, got " + describe(value));
  std::string text = value.get<std::string>();
  if (!is_printable_utf8(text))
    field_fail(pointer, "expected UTF-8 text without control characters, got " + describe(value));
  return text;
}

}  // namespace

Section::Section(const json& object, std::string pointer) : object_(object), pointer_(std::move(pointer)) {
  if (!object_.is_object()) field_fail(shown(pointer_), "expected an object, got " + describe(object_));
}

void Section::reject_unknown_keys(const std::set<std::string>& known) const {
  for (const auto& item : object_.items()) {
    if (!known.count(item.key())) field_fail(child(pointer_, item.key()), "unknown key");
  }
}

Section Section::section(const char* key) const {
  static const json empty = json::object();
  return Section(has(key) ? object_.at(key) : empty, pointer(key));
}

void Section::read(const char* key, int& out) const {
  if (has(key)) out = integer_of<int>(object_.at(key), pointer(key));
}

void Section::read(const char* key, int64_t& out) const {
  if (has(key)) out = integer_of<int64_t>(object_.at(key), pointer(key));
}

void Section::read(const char* key, uint64_t& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  // nlohmann parses non-negative literals as unsigned, but a document built in code may hold signed ones.
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    field_fail(pointer(key), "expected a non-negative integer, got " + describe(value));
  }
  out = value.get<uint64_t>();
}

void Section::read(const char* key, double& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_number()) field_fail(pointer(key), "expected a number, got " + describe(value));
  out = value.get<double>();
  if (!std::isfinite(out)) field_fail(pointer(key), "expected a finite number, got " + describe(value));
}

void Section::read(const char* key, std::array<double, 2>& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_array() || value.size() != 2 || !value[0].is_number() || !value[1].is_number())
    field_fail(pointer(key), "expected an array of 2 numbers, got " + describe(value));
  for (size_t i = 0; i < 2; ++i) {
    out[i] = value[i].get<double>();
    if (!std::isfinite(out[i])) field_fail(pointer(key), "expected finite numbers, got " + value.dump());
  }
}

void Section::read(const char* key, bool& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_boolean()) field_fail(pointer(key), "expected true or false, got " + describe(value));
  out = value.get<bool>();
}

void Section::read(const char* key, std::string& out) const {
  if (has(key)) out = text_of(object_.at(key), pointer(key));
}

void Section::read(const char* key, std::vector<int64_t>& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_array()) field_fail(pointer(key), "expected an array of integers, got " + describe(value));
  std::vector<int64_t> read;
  read.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    read.push_back(integer_of<int64_t>(value[i], pointer(key) + "/" + std::to_string(i)));
  out = std::move(read);
}

void Section::read(const char* key, std::vector<std::string>& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_array()) field_fail(pointer(key), "expected an array of strings, got " + describe(value));
  std::vector<std::string> read;
  read.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i)
    read.push_back(text_of(value[i], pointer(key) + "/" + std::to_string(i)));
  out = std::move(read);
}

void Section::read(const char* key, std::vector<std::vector<double>>& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (!value.is_array())
    field_fail(pointer(key), "expected an array of arrays of numbers, got " + describe(value));
  std::vector<std::vector<double>> read(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string row = pointer(key) + "/" + std::to_string(i);
    if (!value[i].is_array()) field_fail(row, "expected an array of numbers, got " + describe(value[i]));
    for (size_t k = 0; k < value[i].size(); ++k) {
      const json& x = value[i][k];
      if (!x.is_number() || !std::isfinite(x.get<double>()))
        field_fail(row + "/" + std::to_string(k), "expected a finite number, got " + describe(x));
      read[i].push_back(x.get<double>());
    }
  }
  out = std::move(read);
}

void Section::read(const char* key, std::optional<std::string>& out) const {
  if (!has(key)) return;
  const json& value = object_.at(key);
  if (value.is_null()) {
    out = std::nullopt;
  } else if (value.is_string()) {
    out = text_of(value, pointer(key));
  } else {
    field_fail(pointer(key), "expected a string or null, got " + describe(value));
  }
}

void Section::check_number(const char* key, int64_t value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind != Valid::kRange) check_lacking(key);
  if (!in_range(static_cast<double>(value), valid))
    field_fail(pointer(key), "must be " + range_text(valid) + ", got " + std::to_string(value));
}

void Section::check(const char* key, int64_t value, const Valid& valid) const {
  check_number(key, value, valid);
}

void Section::check(const char* key, uint64_t value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind != Valid::kRange) check_lacking(key);
  if (!in_range(static_cast<double>(value), valid))
    field_fail(pointer(key), "must be " + range_text(valid) + ", got " + std::to_string(value));
}

void Section::check(const char* key, double value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind != Valid::kRange) check_lacking(key);
  if (!in_range(value, valid))
    field_fail(pointer(key), "must be " + range_text(valid) + ", got " + show_number(value));
}

void Section::check(const char* key, bool, const Valid& valid) const {
  if (valid.kind != Valid::kAny) check_lacking(key);
}

void Section::check(const char* key, const std::array<double, 2>& value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind != Valid::kRange) check_lacking(key);
  // A range applies to each element.
  for (size_t i = 0; i < value.size(); ++i) {
    if (!in_range(value[i], valid))
      field_fail(pointer(key) + "/" + std::to_string(i),
                 "must be " + range_text(valid) + ", got " + show_number(value[i]));
  }
}

void Section::check_string(const std::string& at, const std::string& value, const Valid& valid) const {
  if (valid.kind == Valid::kNotEmpty && value.empty()) field_fail(at, "must not be empty");
  if (valid.kind == Valid::kOneOf &&
      std::find(valid.choices.begin(), valid.choices.end(), value) == valid.choices.end()) {
    field_fail(at, "expected " + choices_text(valid.choices, "\"") + ", got \"" + value + "\"");
  }
}

void Section::check(const char* key, const std::string& value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind == Valid::kRange) check_lacking(key);
  check_string(pointer(key), value, valid);
}

void Section::check(const char* key, const std::vector<int64_t>& value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind == Valid::kNotEmpty) {
    if (value.empty()) field_fail(pointer(key), "must not be empty");
    return;
  }
  if (valid.kind != Valid::kRange) check_lacking(key);
  for (size_t i = 0; i < value.size(); ++i) {
    if (!in_range(static_cast<double>(value[i]), valid))
      field_fail(pointer(key) + "/" + std::to_string(i),
                 "must be " + range_text(valid) + ", got " + std::to_string(value[i]));
  }
}

void Section::check(const char* key, const std::vector<std::string>& value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind == Valid::kNotEmpty) {
    if (value.empty()) field_fail(pointer(key), "must not be empty");
    return;
  }
  if (valid.kind != Valid::kOneOf) check_lacking(key);
  for (size_t i = 0; i < value.size(); ++i)
    check_string(pointer(key) + "/" + std::to_string(i), value[i], valid);
}

void Section::check(const char* key, const std::vector<std::vector<double>>& value,
                    const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind != Valid::kNotEmpty) check_lacking(key);
  if (value.empty()) field_fail(pointer(key), "must not be empty");
}

void Section::check(const char* key, const std::optional<std::string>& value, const Valid& valid) const {
  if (valid.kind == Valid::kAny) return;
  if (valid.kind == Valid::kRange) check_lacking(key);
  if (value) check_string(pointer(key), *value, valid);
}

void Section::check_lacking(const char* key) const {
  throw std::logic_error("field " + pointer(key) + ": its table row asks a check its type lacks");
}

}  // namespace io
