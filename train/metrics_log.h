// RUN/metrics.jsonl: one JSON object per logged step (docs/architecture.md "The run folder"). The trainer
// appends a record at log steps and eval steps; resume keeps the records up to the checkpoint's step; the
// analysis layer reads them back for the report.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace train {

// One line of metrics.jsonl; eval fields only at eval steps.
struct MetricsRecord {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  std::optional<double> eval_loss, eval_acc;
};

nlohmann::json metrics_to_json(const MetricsRecord& r);
// Validates one metrics object: "step" integer >= 0; "loss", "lr", "grad_norm", "tokens_per_s" numbers;
// optional numbers "eval_loss", "eval_acc"; other keys ignored. Errors: "SOURCE: /key: expected ...".
MetricsRecord metrics_record_from_json(const nlohmann::json& j, const std::string& source);
// Every non-blank line of a metrics.jsonl file; errors name "PATH:LINE". A last line without its newline
// that is not valid JSON is a write torn by a crash or a full disk: it is dropped, not an error.
std::vector<MetricsRecord> read_metrics_jsonl(const std::string& path);

// Appends records to metrics.jsonl, one line each, checking every write: a failure (disk full, I/O error)
// throws io::WriteError naming the file, so a run never goes on with lines silently missing.
class MetricsAppender {
 public:
  explicit MetricsAppender(const std::string& path);  // creates the file when missing
  ~MetricsAppender();
  MetricsAppender(const MetricsAppender&) = delete;
  MetricsAppender& operator=(const MetricsAppender&) = delete;
  void append(const MetricsRecord& r);

 private:
  std::string path_;
  int fd_ = -1;
};
// Rewrites the file keeping only the records up to `step` (a resumed run logs the later ones again).
void truncate_metrics_jsonl(const std::string& path, int64_t step);

}  // namespace train
