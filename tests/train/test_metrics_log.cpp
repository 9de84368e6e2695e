// RUN/metrics.jsonl: the reader validates every line and names the file, line and field of a bad one.
#include <sys/resource.h>

#include <boost/test/unit_test.hpp>
#include <csignal>
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

BOOST_AUTO_TEST_CASE(a_torn_last_line_is_dropped_and_a_torn_middle_line_is_an_error) {
  const testing::TempDir tmp;
  const std::string path = tmp.dir.string() + "/metrics.jsonl";
  const std::string good = metrics_to_json(MetricsRecord{50, 1.0, 1e-3, 0.5, 100, {}, {}}).dump() + "\n";
  io::write_text_file_atomically(path, good + good.substr(0, good.size() / 2));  // a write cut by a full disk
  BOOST_TEST(read_metrics_jsonl(path).size() == 1u);
  truncate_metrics_jsonl(path, 100);  // resume: the torn tail goes
  BOOST_TEST(io::read_text_file(path) == good);
  io::write_text_file_atomically(path, good.substr(0, good.size() / 2) + "\n" + good);
  BOOST_CHECK_THROW(read_metrics_jsonl(path), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(a_failed_append_is_a_write_error_naming_the_file) {
  testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  MetricsAppender full(path);
  // A file-size limit of 0 with SIGXFSZ ignored: every write fails (EFBIG), as on a full disk.
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  const rlimit none{0, old.rlim_max};
  setrlimit(RLIMIT_FSIZE, &none);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  std::string what;
  try {
    full.append(MetricsRecord{1, 1.0, 1e-3, 0.5, 100, {}, {}});
  } catch (const io::WriteError& e) {
    what = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  BOOST_TEST(what.rfind(path + ": cannot write: ", 0) == 0, what);
}

BOOST_AUTO_TEST_CASE(the_log_is_never_opened_through_a_link_or_as_a_device) {
  testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  std::filesystem::create_symlink(dir.file("outside.jsonl"), path);
  BOOST_CHECK_THROW(MetricsAppender{path}, std::runtime_error);
  BOOST_TEST(!std::filesystem::exists(dir.file("outside.jsonl")));
  BOOST_CHECK_THROW(MetricsAppender{"/dev/null"}, std::runtime_error);
}
