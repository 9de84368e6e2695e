// io/number_text.h: one strict parser per type for numbers given as text, and the ranges of io::Valid
// (shared with the field tables) refusing NaN.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <limits>

#include "io/field_table.h"
#include "io/number_text.h"

namespace {

template <typename T>
std::string problem(const std::string& text, const io::Valid& valid = io::Valid()) {
  T out{};
  return io::parse_number(text, out, valid);
}

}  // namespace

BOOST_AUTO_TEST_CASE(integers_are_plain_decimal_and_never_wrapped) {
  int i = 0;
  BOOST_TEST(io::parse_number("010", i) == "");
  BOOST_TEST(i == 10);
  BOOST_TEST(io::parse_number("-7", i) == "");
  BOOST_TEST(i == -7);
  uint64_t u = 0;
  BOOST_TEST(io::parse_number("18446744073709551615", u) == "");
  BOOST_TEST(u == std::numeric_limits<uint64_t>::max());
  int64_t l = 0;
  BOOST_TEST(io::parse_number("-9223372036854775808", l) == "");
  BOOST_TEST(l == std::numeric_limits<int64_t>::min());

  BOOST_TEST(problem<int>("") == "expected an integer, got nothing");
  for (const char* bad : {"1.5", "1e3", "0x10", "+5", " 5", "5 ", "-", "nan", "inf", "1,000", "five"})
    BOOST_TEST(problem<int>(bad) == std::string("expected an integer, got \"") + bad + "\"", bad);
  BOOST_TEST(problem<uint64_t>("-1") == "must be >= 0, got -1");
  BOOST_TEST(problem<uint64_t>("18446744073709551616") ==
             "must be <= 18446744073709551615, got 18446744073709551616");
  BOOST_TEST(problem<int64_t>("9223372036854775808", io::at_least(0)) ==
             "must be >= 0 and <= 9223372036854775807, got 9223372036854775808");
  BOOST_TEST(problem<int>("2147483648") == "must be <= 2147483647, got 2147483648");
  BOOST_TEST(problem<int>("99999999999999999999999999999999999999999999999999", io::at_least(1)) ==
             "must be >= 1 and <= 2147483647, got 9999999999999999999999999999999999999...");
  BOOST_TEST(problem<int>("0", io::at_least(1)) == "must be >= 1, got 0");
  BOOST_TEST(problem<int>("1001", io::at_least(2).below(1001)) == "must be >= 2 and <= 1000, got 1001");
  BOOST_TEST(problem<int>("0", io::above(0)) == "must be >= 1, got 0");
  BOOST_TEST(problem<int>("1000", io::at_least(2).below(1001)) == "");
  // A refused value leaves the target as it was.
  i = 42;
  BOOST_TEST(io::parse_number("1.5", i) != "");
  BOOST_TEST(i == 42);
}

BOOST_AUTO_TEST_CASE(numbers_are_finite_and_in_range) {
  double d = 0;
  BOOST_TEST(io::parse_number("1e-3", d) == "");
  BOOST_TEST(d == 1e-3);
  BOOST_TEST(io::parse_number("-2.5", d) == "");
  BOOST_TEST(d == -2.5);
  BOOST_TEST(problem<double>("") == "expected a number, got nothing");
  for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e400", "-1e400"})
    BOOST_TEST(problem<double>(bad) == std::string("expected a finite number, got \"") + bad + "\"", bad);
  for (const char* bad : {"0x1p3", "1.5x", " 1", "+1", "one", "1,5"})
    BOOST_TEST(problem<double>(bad) == std::string("expected a number, got \"") + bad + "\"", bad);
  BOOST_TEST(problem<double>("2", io::at_least(0.01).up_to(1)) == "must be >= 0.01 and <= 1, got 2");
  BOOST_TEST(problem<double>("0", io::above(0)) == "must be > 0, got 0");
  BOOST_TEST(problem<double>("1", io::at_least(0.01).up_to(1)) == "");
}

BOOST_AUTO_TEST_CASE(no_range_holds_nan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const io::Valid& valid :
       {io::at_least(0), io::above(0), io::at_least(0).below(1), io::at_least(-1e300).up_to(1e300)})
    BOOST_TEST(!io::in_range(nan, valid));
  BOOST_TEST(io::in_range(0.5, io::at_least(0).below(1)));
}
