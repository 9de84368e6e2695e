#include <boost/test/unit_test.hpp>

// The one JSON reader (io/json_read.h) and the field tables (io/field_table.h): each refusal is one line
// naming the source and where, nesting is bounded before any value is built, and a struct declared as a
// table reads every member type with the same messages as the run configs.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "io/field_table.h"
#include "io/json_read.h"

namespace fs = std::filesystem;

namespace {

// The JsonError message of parsing `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    io::parse_json_text(text, "f.json");
  } catch (const io::JsonError& error) {
    return error.what();
  }
  return "";
}

std::string nested(size_t depth, const std::string& open = "[", const std::string& close = "]") {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += open;
  for (size_t i = 0; i < depth; ++i) text += close;
  return text;
}

}  // namespace

BOOST_AUTO_TEST_CASE(nesting_is_bounded_with_the_position) {
  // 64 levels are JSON the reader accepts; the 65th is refused at its bracket.
  BOOST_TEST(io::parse_json_text(nested(64), "f.json").is_array());
  BOOST_TEST(error_of(nested(65)) == "f.json: line 1, column 65: nested deeper than 64 levels");
  // Objects count as arrays do, and a string's brackets do not count.
  std::string objects = "{\"a\": \"[[[[\", \"b\":\n ";
  for (int i = 0; i < 70; ++i) objects += "{\"k\": ";
  objects += "1" + std::string(70, '}') + "}";
  BOOST_TEST(error_of(objects) == "f.json: line 2, column 380: nested deeper than 64 levels");
  // 200,000 levels, even under a key nobody reads: one line, no stack overflow.
  const std::string deep = "{\"unknown\": " + nested(200000) + "}";
  BOOST_TEST(error_of(deep) == "f.json: line 1, column 76: nested deeper than 64 levels");
  BOOST_TEST(error_of(nested(200000, "{\"a\":", "}")).find("nested deeper than 64 levels") !=
             std::string::npos);
  // The ordered reader is bounded the same way.
  try {
    io::parse_ordered_json_text(deep, "s.json");
    BOOST_FAIL("expected a JsonError");
  } catch (const io::JsonError& error) {
    BOOST_TEST(std::string(error.what()) == "s.json: line 1, column 76: nested deeper than 64 levels");
  }
}

BOOST_AUTO_TEST_CASE(nul_bytes_and_trailing_text_are_refused) {
  BOOST_TEST(error_of(std::string("{\"name\": \"x\"}\0 garbage {{{", 27)) ==
             "f.json: line 1, column 14: a NUL byte, not JSON text");
  BOOST_TEST(error_of(std::string("{\n\"a\": \"x\0y\"}", 12)) ==
             "f.json: line 2, column 8: a NUL byte, not JSON text");
  BOOST_TEST(error_of("{} {}").rfind("f.json: line 1, column 4: malformed JSON (", 0) == 0,
             error_of("{} {}"));
}

BOOST_AUTO_TEST_CASE(duplicates_syntax_and_numbers_name_where) {
  BOOST_TEST(error_of(R"({"a": [{"b": 1, "b": 2}]})") == "f.json: /a/0/b: duplicate key");
  BOOST_TEST(error_of(R"({"a~/b": {"c": 1, "c": 1}})") == "f.json: /a~0~1b/c: duplicate key");
  BOOST_TEST(error_of("{\n  \"a\": 1,\n}").rfind("f.json: line 3, column 1: malformed JSON (", 0) == 0);
  BOOST_TEST(error_of("{\"lr\": 1e400}") == "f.json: line 1, column 8: number 1e400 is out of range");
  // A long bad token is quoted as a short prefix, on one line.
  const std::string message = error_of("\"" + std::string(100000, 'x') + "\n");
  BOOST_TEST(message.size() < 300u, message.size());
  BOOST_TEST(message.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(text_that_may_be_a_word) {
  BOOST_TEST(!io::parse_json_text_if_json("copy", "--set task.kind=copy").has_value());
  BOOST_TEST(!io::parse_json_text_if_json("runs/x", "v").has_value());
  BOOST_TEST(*io::parse_json_text_if_json("[1, 2]", "v") == nlohmann::json::array({1, 2}));
  try {
    io::parse_json_text_if_json(nested(100), "--set model.d_model=[[...");
    BOOST_FAIL("expected a JsonError");
  } catch (const io::JsonError& error) {
    BOOST_TEST(std::string(error.what()) ==
               "--set model.d_model=[[...: line 1, column 65: nested deeper than 64 levels");
  }
}

BOOST_AUTO_TEST_CASE(files_are_bounded) {
  const fs::path dir = fs::temp_directory_path() / "attograd_test_json_read";
  fs::create_directories(dir);
  const std::string big = (dir / "big.json").string();
  std::ofstream(big) << "[" << std::string(2000, ' ') << "]";
  BOOST_TEST(io::load_json_file(big).is_array());
  try {
    io::load_json_file(big, 1000, "a sweep file");
    BOOST_FAIL("expected a JsonError");
  } catch (const io::JsonError& error) {
    BOOST_TEST(std::string(error.what()) == big + ": larger than 1000 bytes, not a sweep file");
  }
  try {
    io::load_json_file((dir / "absent.json").string());
    BOOST_FAIL("expected a JsonError");
  } catch (const io::JsonError& error) {
    BOOST_TEST(std::string(error.what()) ==
               (dir / "absent.json").string() + ": cannot open (No such file or directory)");
  }
  fs::remove_all(dir);
}

namespace {

// A request-like struct with every member type a table row can hold.
struct Request {
  int steps = 10;
  int64_t big = 0;
  uint64_t seed = 1;
  double lr = 0.5;
  bool verbose = false;
  std::string mode = "zero";
  std::array<double, 2> pair{0.1, 0.2};
  std::vector<int64_t> layers;
  std::vector<std::string> points;
  std::optional<std::string> clean;
};

const io::Table<Request>& request_fields() {
  static const io::Table<Request> fields = {
      {"steps", &Request::steps, "steps to run", io::at_least(1)},
      {"big", &Request::big, "any integer"},
      {"seed", &Request::seed, "the seed"},
      {"lr", &Request::lr, "a rate", io::above(0).below(1)},
      {"verbose", &Request::verbose, "say more"},
      {"mode", &Request::mode, "what to do", io::one_of({"zero", "mean", "resample"})},
      {"pair", &Request::pair, "two numbers", io::at_least(0)},
      {"layers", &Request::layers, "the layers", io::at_least(0)},
      {"points", &Request::points, "hook points", io::one_of({"a", "b"})},
      {"clean", &Request::clean, "the clean prompt", io::not_empty()},
  };
  return fields;
}

std::string table_error_of(const std::string& text) {
  try {
    io::read_table(io::parse_json_text(text, "r.json"), request_fields(), "r.json");
  } catch (const io::JsonError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_struct_read_as_a_table) {
  const Request r = io::read_table(
      io::parse_json_text(R"({"steps": 3, "big": -5000000000, "seed": 18446744073709551615, "lr": 0.25,
        "verbose": true, "mode": "mean", "pair": [0.5, 0.75], "layers": [0, 2], "points": ["b", "a"],
        "clean": "BOS 1 2"})",
                          "r.json"),
      request_fields(), "r.json");
  BOOST_TEST(r.steps == 3);
  BOOST_TEST(r.big == -5000000000);
  BOOST_TEST(r.seed == UINT64_MAX);
  BOOST_TEST(r.lr == 0.25);
  BOOST_TEST(r.verbose);
  BOOST_TEST(r.mode == "mean");
  BOOST_TEST(r.pair[1] == 0.75);
  BOOST_TEST((r.layers == std::vector<int64_t>{0, 2}));
  BOOST_TEST((r.points == std::vector<std::string>{"b", "a"}));
  BOOST_TEST(r.clean.value() == "BOS 1 2");
  // Absent fields keep their defaults; null is an absent optional; to_json and == follow the rows.
  const Request defaults = io::read_table(nlohmann::json::object(), request_fields(), "r.json");
  BOOST_TEST(!defaults.clean.has_value());
  BOOST_TEST(io::fields_to_json(request_fields(), defaults)["clean"].is_null());
  const Request again = io::read_table(io::fields_to_json(request_fields(), r), request_fields(), "r.json");
  BOOST_TEST(io::fields_equal(request_fields(), r, again));
  BOOST_TEST(!io::fields_equal(request_fields(), r, defaults));
}

BOOST_AUTO_TEST_CASE(table_errors_are_one_line_with_the_pointer) {
  BOOST_TEST(table_error_of("[]") == "r.json: /: expected an object, got an array");
  BOOST_TEST(table_error_of(R"({"step": 1})") == "r.json: /step: unknown key");
  BOOST_TEST(table_error_of(R"({"steps": 0})") == "r.json: /steps: must be >= 1, got 0");
  BOOST_TEST(table_error_of(R"({"steps": 1.5})") == "r.json: /steps: expected an integer, got 1.5");
  BOOST_TEST(table_error_of(R"({"steps": 3000000000})") ==
             "r.json: /steps: integer out of range, got 3000000000");
  BOOST_TEST(table_error_of(R"({"seed": -1})") == "r.json: /seed: expected a non-negative integer, got -1");
  BOOST_TEST(table_error_of(R"({"lr": 1})") == "r.json: /lr: must be > 0 and < 1, got 1");
  BOOST_TEST(table_error_of(R"({"verbose": 1})") == "r.json: /verbose: expected true or false, got 1");
  BOOST_TEST(table_error_of(R"({"mode": "max"})") ==
             "r.json: /mode: expected \"zero\", \"mean\" or \"resample\", got \"max\"");
  BOOST_TEST(table_error_of(R"({"pair": [0.5, -1]})") == "r.json: /pair/1: must be >= 0, got -1");
  BOOST_TEST(table_error_of(R"({"layers": [0, -1]})") == "r.json: /layers/1: must be >= 0, got -1");
  BOOST_TEST(table_error_of(R"({"layers": [0, "1"]})") ==
             "r.json: /layers/1: expected an integer, got string \"1\"");
  BOOST_TEST(table_error_of(R"({"layers": {"a": [[1]]}})") ==
             "r.json: /layers: expected an array of integers, got an object");
  BOOST_TEST(table_error_of(R"({"points": ["a", "c"]})") ==
             "r.json: /points/1: expected \"a\" or \"b\", got \"c\"");
  BOOST_TEST(table_error_of(R"({"points": "a"})") ==
             "r.json: /points: expected an array of strings, got string \"a\"");
  BOOST_TEST(table_error_of(R"({"clean": ""})") == "r.json: /clean: must not be empty");
  BOOST_TEST(table_error_of(R"({"clean": 3})") == "r.json: /clean: expected a string or null, got 3");
  BOOST_TEST(table_error_of(R"({"mode": "a\u0001b"})") ==
             "r.json: /mode: expected UTF-8 text without control characters, got string \"a\\u0001b\"");
}

BOOST_AUTO_TEST_CASE(docs_rows_follow_the_table) {
  std::vector<io::FieldInfo> infos;
  io::add_field_infos(infos, "request", request_fields());
  BOOST_TEST_REQUIRE(infos.size() == request_fields().size());
  BOOST_TEST(infos[0].path == "request.steps");
  BOOST_TEST(infos[0].type == "integer");
  BOOST_TEST(infos[0].default_value == "10");
  BOOST_TEST(infos[0].valid == ">= 1");
  BOOST_TEST(infos[3].default_value == "0.5");
  BOOST_TEST(infos[3].valid == "> 0 and < 1");
  BOOST_TEST(infos[5].valid == "`zero`, `mean` or `resample`");
  BOOST_TEST(infos[7].type == "array of integers");
  BOOST_TEST(infos[7].default_value == "[]");
  BOOST_TEST(infos[9].type == "string or null");
  BOOST_TEST(infos[9].default_value == "null");
  BOOST_TEST(infos[1].valid == "any");
}
