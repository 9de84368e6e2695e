// RUN/metrics.jsonl: the reader validates every line and names the file, line and field of a bad one.
#define BOOST_TEST_MODULE metrics_log
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>

#include "common/temp_dir.h"
#include "io/atomic_file.h"
#include "train/metrics_log.h"

using namespace train;

BOOST_AUTO_TEST_CASE(metrics_jsonl_reader) {
  const testing::TempDir tmp;
  const std::string dir = tmp.dir.string();
  io::write_text_file_atomically(
      dir + "/metrics.jsonl",
      "{\"step\": 0, \"loss\": 2.3, \"lr\": 0.001, \"grad_norm\": 1.2, \"tokens_per_s\": 9000}\n"
      "\n{\"step\": 250, \"loss\": 1.1, \"lr\": 0.001, \"grad_norm\": 0.8, \"tokens_per_s\": 9100, "
      "\"eval_loss\": 1.2, \"eval_acc\": 0.4}\n");
  const auto m = read_metrics_jsonl(dir + "/metrics.jsonl");
  BOOST_TEST_REQUIRE(m.size() == 2u);
  BOOST_TEST(!m[0].eval_acc.has_value());
  BOOST_TEST(m[1].eval_acc.value_or(-1) == 0.4);
  io::write_text_file_atomically(dir + "/bad.jsonl", "{\"step\": 0, \"loss\": \"x\"}\n");
  try {
    read_metrics_jsonl(dir + "/bad.jsonl");
    BOOST_FAIL("expected an error");
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()) == dir + "/bad.jsonl:1: /loss: expected a number, got string");
  }
}

BOOST_AUTO_TEST_CASE(truncate_keeps_the_records_up_to_the_step) {
  const testing::TempDir tmp;
  const std::string dir = tmp.dir.string();
  std::string text;
  for (int s : {50, 100, 150})
    text += metrics_to_json(MetricsRecord{s, 1.0, 1e-3, 0.5, 100, {}, {}}).dump() + "\n";
  io::write_text_file_atomically(dir + "/metrics.jsonl", text);
  truncate_metrics_jsonl(dir + "/metrics.jsonl", 100);
  const auto m = read_metrics_jsonl(dir + "/metrics.jsonl");
  BOOST_TEST_REQUIRE(m.size() == 2u);
  BOOST_TEST(m.back().step == 100);
}
