#include "io/number_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace io {
namespace {

// Wide enough for every int64_t and uint64_t and for the bounds a range gives them.
__extension__ using Wide = __int128;

// The text as an error line quotes it: in double quotes, at most 40 bytes.
std::string quoted(const std::string& text) {
  return "\"" + (text.size() > 40 ? text.substr(0, 37) + "..." : text) + "\"";
}

std::string wide_text(Wide v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  for (; v != 0; v /= 10) digits += static_cast<char>('0' + static_cast<int>(negative ? -(v % 10) : v % 10));
  if (negative) digits += '-';
  std::reverse(digits.begin(), digits.end());
  return digits;
}

template <typename T>
std::string parse_integer(const std::string& text, T& out, const Valid& valid) {
  if (text.empty()) return "expected an integer, got nothing";
  const size_t start = text[0] == '-' ? 1 : 0;
  if (start == text.size() ||
      !std::all_of(text.begin() + start, text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "expected an integer, got " + quoted(text);
  // Digits beyond 10^30 make the value too large for any range here; stop accumulating there.
  Wide value = 0;
  bool huge = false;
  for (size_t i = start; i < text.size(); ++i) {
    if (value > Wide(1000000000000000000) * 1000000000000) {
      huge = true;
      break;
    }
    value = value * 10 + (text[i] - '0');
  }
  if (start == 1) value = -value;
  const Wide type_low = std::numeric_limits<T>::min(), type_high = std::numeric_limits<T>::max();
  Wide low = type_low, high = type_high;
  if (valid.kind == Valid::kRange) {
    const double l = valid.low_inclusive ? std::ceil(valid.low) : std::floor(valid.low) + 1;
    low = std::max(low, static_cast<Wide>(std::max(l, -1e30)));
    if (valid.has_high) {
      const double h = valid.high_inclusive ? std::floor(valid.high) : std::ceil(valid.high) - 1;
      high = std::min(high, static_cast<Wide>(std::min(h, 1e30)));
    }
  }
  const bool below = !huge && value < low, beyond = huge || value > high;
  if (below || beyond) {
    std::string range;
    if (low > type_low || below) range = ">= " + wide_text(low);
    if (high < type_high || beyond) range += (range.empty() ? "<= " : " and <= ") + wide_text(high);
    return "must be " + range + ", got " + (text.size() > 40 ? text.substr(0, 37) + "..." : text);
  }
  out = static_cast<T>(value);
  return "";
}

}  // namespace

bool in_range(double value, const Valid& valid) {
  if (std::isnan(value)) return false;  // NaN compares false with everything: refused, never let through
  const bool low_ok = valid.low_inclusive ? value >= valid.low : value > valid.low;
  return low_ok && (!valid.has_high || value < valid.high || (valid.high_inclusive && value == valid.high));
}

std::string parse_number(const std::string& text, int& out, const Valid& valid) {
  return parse_integer(text, out, valid);
}

std::string parse_number(const std::string& text, int64_t& out, const Valid& valid) {
  return parse_integer(text, out, valid);
}

std::string parse_number(const std::string& text, uint64_t& out, const Valid& valid) {
  return parse_integer(text, out, valid);
}

std::string parse_number(const std::string& text, double& out, const Valid& valid) {
  if (text.empty()) return "expected a number, got nothing";
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::invalid_argument || ptr != end) return "expected a number, got " + quoted(text);
  // Beyond double's range ("1e400", "1e-400"), NaN and infinities.
  if (ec == std::errc::result_out_of_range || !std::isfinite(value))
    return "expected a finite number, got " + quoted(text);
  if (valid.kind == Valid::kRange && !in_range(value, valid))
    return "must be " + range_text(valid) + ", got " + show_number(value);
  out = value;
  return "";
}

}  // namespace io
