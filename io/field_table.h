// Field tables: a struct read from a JSON object, declared once as a table of rows (the JSON key, the
// member, a one-line meaning, the values it accepts). Reading with one-line type and range errors, the
// unknown-key check, to_json, == and the docs' field tables follow from the rows.
//
// How to declare a struct as a table:
//   const io::Table<MyRequest>& my_request_fields() {
//     static const io::Table<MyRequest> fields = {
//         {"steps", &MyRequest::steps, "optimizer steps", io::at_least(1)},
//         {"mode", &MyRequest::mode, "what to do", io::one_of({"zero", "mean"})},
//     };
//     return fields;
//   }
//   MyRequest r = io::read_table(document, my_request_fields(), "request.json");
// Errors are io::JsonError "SOURCE: /POINTER: WHAT", e.g. "request.json: /steps: must be >= 1, got 0".
// A member may be int, int64_t, uint64_t, double, bool, std::string, std::array<double, 2>,
// std::vector<int64_t>, std::vector<std::string> or std::optional<std::string> (absent or null = nullopt).
// Checks between fields are code after the table's pass, failing through io::field_fail.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "io/field_info.h"
#include "io/json_read.h"

namespace io {

// A field's problem before the reader knows its source: the JSON pointer and what was expected. read_table
// (and train's config loading) turn it into a JsonError naming the source.
struct FieldProblem {
  std::string pointer;
  std::string message;
};
[[noreturn]] void field_fail(const std::string& pointer, const std::string& message);

// "SOURCE: POINTER: MESSAGE" as one printable line (the root pointer "" shown as "/").
JsonError field_error(const std::string& source, const FieldProblem& problem);

// The values a field accepts beyond its type, checked as soon as its table is read. `note` says, for the
// docs, what code after that pass checks (a rule between fields, a task's rules). On a vector a range or
// choice applies to each element and not_empty to the list; on an optional, to its value when present.
struct Valid {
  enum Kind { kAny, kRange, kNotEmpty, kOneOf };
  Kind kind = kAny;
  // kRange: value >= low (value > low when !low_inclusive), and value < high when has_high.
  double low = 0, high = 0;
  bool low_inclusive = true, has_high = false;
  std::vector<std::string> choices;  // kOneOf
  std::string note;

  // A range's upper bound, excluded: above(0).below(1) is the open interval (0, 1).
  Valid below(double bound) const {
    Valid valid = *this;
    valid.high = bound;
    valid.has_high = true;
    return valid;
  }
};
Valid at_least(double low, std::string note = "");
Valid above(double low);
Valid not_empty();
Valid one_of(std::vector<std::string> choices);
// Nothing to check field by field: the type's range, or a rule that code after the pass checks.
Valid rule(std::string note);

// Whether a resumed run may change the field (train's config tables; other tables leave it kFixed).
enum Resume { kFixed, kResumable };

// One row of a table: the JSON key, the member of S it reads into, a one-line meaning, the values it
// accepts, whether a resumed run may change it, and what its default stands for when it is a placeholder.
template <typename S>
struct Field {
  using Member = std::variant<int S::*, int64_t S::*, uint64_t S::*, double S::*, bool S::*, std::string S::*,
                              std::array<double, 2> S::*, std::vector<int64_t> S::*,
                              std::vector<std::string> S::*, std::optional<std::string> S::*>;
  // A constructor rather than an aggregate: GCC 12 fails on a braced row that leaves `valid` to its default
  // when the member is a vector or optional.
  Field(const char* key_, Member member_, const char* meaning_, Valid valid_ = Valid(),
        Resume resume_ = kFixed, const char* default_means_ = "")
      : key(key_),
        member(member_),
        meaning(meaning_),
        valid(std::move(valid_)),
        resume(resume_),
        default_means(default_means_) {}

  const char* key;
  Member member;
  const char* meaning;
  Valid valid;
  Resume resume;
  const char* default_means;  // what the default stands for, when it is a placeholder
};
template <typename S>
using Table = std::vector<Field<S>>;

// How an error line shows a pointer: the root ("") as "/", so that the line always has three parts.
std::string shown(const std::string& pointer);
// RFC 6901: "~" and "/" inside a key are written "~0" and "~1".
std::string escape_key(const std::string& key);
// `pointer` + "/" + the escaped key.
std::string child(const std::string& pointer, const std::string& key);
// A JSON value as an error line quotes it: short, and saying what kind of value it is (never a dump of an
// object or array).
std::string describe(const nlohmann::json& value);
// Doubles as a person wrote them: 0.001, 0, -1 (nlohmann's shortest round trip, without a trailing ".0").
std::string show_number(double x);
// "a or b", "a, b or c", each in `quote`s: "\"cosine\" or \"constant\"".
std::string choices_text(const std::vector<std::string>& choices, const std::string& quote);
// A kRange as error lines and the docs say it: ">= 1", "> 0 and < 1".
std::string range_text(const Valid& valid);
// What a docs table's "valid" column says of a row: ">= 1, divides `d_model`", "`a` or `b`", "any".
std::string valid_text(const Valid& valid);

// One object of a document (the root or a section) and the readers for its fields. A missing field keeps
// the struct's value; a present one must have the right type. Failures throw FieldProblem.
class Section {
 public:
  Section(const nlohmann::json& object, std::string pointer);

  void reject_unknown_keys(const std::set<std::string>& known) const;
  bool has(const char* key) const { return object_.contains(key); }
  std::string pointer(const char* key) const { return child(pointer_, key); }
  // The object at `key`, or an empty one when absent (its fields keep their defaults).
  Section section(const char* key) const;

  void read(const char* key, int& out) const;                    // any integer the type holds
  void read(const char* key, int64_t& out) const;                // any integer the type holds
  void read(const char* key, uint64_t& out) const;               // a non-negative integer
  void read(const char* key, double& out) const;                 // a finite number
  void read(const char* key, std::array<double, 2>& out) const;  // an array of two finite numbers
  void read(const char* key, bool& out) const;
  void read(const char* key, std::string& out) const;  // UTF-8 without control characters
  void read(const char* key, std::vector<int64_t>& out) const;
  void read(const char* key, std::vector<std::string>& out) const;
  void read(const char* key, std::optional<std::string>& out) const;  // null = nullopt

  // A field's Valid, with the one-line messages the docs show.
  void check(const char* key, int value, const Valid& valid) const { check_number(key, value, valid); }
  void check(const char* key, int64_t value, const Valid& valid) const;
  void check(const char* key, uint64_t value, const Valid& valid) const;
  void check(const char* key, double value, const Valid& valid) const;
  void check(const char* key, bool value, const Valid& valid) const;
  void check(const char* key, const std::array<double, 2>& value, const Valid& valid) const;
  void check(const char* key, const std::string& value, const Valid& valid) const;
  void check(const char* key, const std::vector<int64_t>& value, const Valid& valid) const;
  void check(const char* key, const std::vector<std::string>& value, const Valid& valid) const;
  void check(const char* key, const std::optional<std::string>& value, const Valid& valid) const;

  // The table's fields of `s`, read and checked; any other key but `more_keys` (a root's sections) is an
  // error. A field absent from the document keeps the value `s` holds.
  template <typename S>
  void read_fields(const Table<S>& fields, S& s, const std::vector<std::string>& more_keys = {}) const {
    std::set<std::string> known(more_keys.begin(), more_keys.end());
    for (const Field<S>& field : fields) known.insert(field.key);
    reject_unknown_keys(known);
    for (const Field<S>& field : fields)
      std::visit([&](auto member) { read(field.key, s.*member); }, field.member);
    for (const Field<S>& field : fields)
      std::visit([&](auto member) { check(field.key, s.*member, field.valid); }, field.member);
  }

 private:
  void check_number(const char* key, int64_t value, const Valid& valid) const;
  void check_string(const std::string& pointer, const std::string& value, const Valid& valid) const;
  [[noreturn]] void check_lacking(const char* key) const;

  const nlohmann::json& object_;
  std::string pointer_;
};

// A whole document read as one table (its root an object of exactly these fields), starting from `s`:
// errors are JsonError "SOURCE: /POINTER: WHAT".
template <typename S>
S read_table(const nlohmann::json& document, const Table<S>& fields, const std::string& source, S s = S{}) {
  try {
    Section(document, "").read_fields(fields, s);
  } catch (const FieldProblem& problem) {
    throw field_error(source, problem);
  }
  return s;
}

// A member's value as its JSON (nullopt as null).
template <typename V>
nlohmann::json field_value_to_json(const V& value) {
  return nlohmann::json(value);
}
inline nlohmann::json field_value_to_json(const std::optional<std::string>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// The fields of `s` as a JSON object, one key per row.
template <typename S>
nlohmann::json fields_to_json(const Table<S>& fields, const S& s) {
  nlohmann::json object = nlohmann::json::object();
  for (const Field<S>& field : fields)
    std::visit([&](auto member) { object[field.key] = field_value_to_json(s.*member); }, field.member);
  return object;
}

template <typename S>
bool fields_equal(const Table<S>& fields, const S& a, const S& b) {
  for (const Field<S>& field : fields) {
    if (!std::visit([&](auto member) { return a.*member == b.*member; }, field.member)) return false;
  }
  return true;
}

// A member's type as the docs name it.
template <typename V>
std::string field_type_name() {
  if constexpr (std::is_same_v<V, bool>) return "boolean";
  if constexpr (std::is_integral_v<V>) return "integer";
  if constexpr (std::is_floating_point_v<V>) return "number";
  if constexpr (std::is_same_v<V, std::array<double, 2>>) return "array of 2 numbers";
  if constexpr (std::is_same_v<V, std::vector<int64_t>>) return "array of integers";
  if constexpr (std::is_same_v<V, std::vector<std::string>>) return "array of strings";
  if constexpr (std::is_same_v<V, std::optional<std::string>>) return "string or null";
  return "string";
}

// Appends the rows of `fields` (defaults from `defaults`), each path prefixed "SECTION." unless `section`
// is empty.
template <typename S>
void add_field_infos(std::vector<FieldInfo>& infos, const std::string& section, const Table<S>& fields,
                     const S& defaults = S{}) {
  for (const Field<S>& field : fields) {
    std::visit(
        [&](auto member) {
          using V = std::decay_t<decltype(defaults.*member)>;
          const V& value = defaults.*member;
          std::string shown_default;
          if constexpr (std::is_floating_point_v<V>) {
            shown_default = show_number(value);
          } else {
            shown_default = field_value_to_json(value).dump();
          }
          infos.push_back({section.empty() ? field.key : section + "." + field.key, field_type_name<V>(),
                           shown_default, field.default_means, valid_text(field.valid), field.meaning,
                           field.resume == kResumable});
        },
        field.member);
  }
}

}  // namespace io
