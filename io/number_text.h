// Numbers written as text by a user (a command-line option's value): one parser per type, strict, and
// checked against the same io::Valid ranges the field tables use.
//
// An integer is optional "-" and decimal digits, nothing else ("+5", "0x10", "010" as octal, "1e3", "1.5",
// " 5" are refused); a number is decimal or scientific ("0.5", "-2", "1e-3") and finite. Nothing is clamped
// or wrapped: a value beyond the type or the range is refused. Each problem is one line saying what was
// expected and what was given:
//   "expected an integer, got nothing"          ""
//   "expected an integer, got \"1.5\""         a fraction, a word
//   "expected a finite number, got \"nan\""    NaN and infinities
//   "must be >= 0, got -1"                       below the range (an unsigned type's range starts at 0)
//   "must be >= 0 and <= 2147483647, got 9223372036854775808"   beyond the type
#pragma once

#include <cstdint>
#include <string>

#include "io/field_table.h"

namespace io {

// Whether `value` lies in the kRange `valid` (the field tables' range check too); NaN lies in no range.
bool in_range(double value, const Valid& valid);

// Parses `text` into `out` and checks it against `valid` (a kRange, or kAny for the type's whole range).
// Returns "" when `out` holds the value; otherwise the problem, `out` untouched.
std::string parse_number(const std::string& text, int& out, const Valid& valid = Valid());
std::string parse_number(const std::string& text, int64_t& out, const Valid& valid = Valid());
std::string parse_number(const std::string& text, uint64_t& out, const Valid& valid = Valid());
std::string parse_number(const std::string& text, double& out, const Valid& valid = Valid());

}  // namespace io
