#include "study/sweep_collect.h"

#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"
#include "io/json_error.h"
#include "study/run_study.h"
#include "study/view/phase_change.h"
#include "train/checkpoint.h"
#include "train/metrics_log.h"

namespace study {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::optional<BestHead> best_of(const std::vector<HeadScores>& heads, double HeadScores::*field) {
  std::optional<BestHead> best;
  for (const HeadScores& h : heads)
    if (std::isfinite(h.*field) && (!best || h.*field > best->value))
      best = BestHead{h.layer, h.head, h.*field};
  return best;
}

// The settings other than the seed and the keys with one value, by the keys' last segments:
// "d_model=32,vocab=16"; "base" when nothing but the seed varies.
std::string setting_label(const ordered_json& settings, const ordered_json& grid) {
  std::string label;
  for (const auto& item : settings.items()) {
    if (item.key() == "seed" || (grid.contains(item.key()) && grid[item.key()].size() == 1)) continue;
    const std::string key = item.key().substr(item.key().rfind('.') + 1);
    const std::string value =
        item.value().is_string() ? item.value().get<std::string>() : item.value().dump();
    label += (label.empty() ? "" : ",") + key + "=" + value;
  }
  return label.empty() ? "base" : label;
}

SweepRunSummary read_run(const std::string& dir, const std::string& name, const ordered_json& settings,
                         const ordered_json& grid) {
  namespace fs = std::filesystem;
  SweepRunSummary r;
  r.name = name;
  r.settings = settings;
  r.setting = setting_label(settings, grid);
  const std::string run = dir + "/" + name;
  std::error_code ec;
  if (!fs::is_directory(run, ec)) {
    r.status = "missing";
    return r;
  }
  r.status = "started";
  if (fs::exists(run + "/config.json")) {
    const json config = io::parse_json(io::read_text_file(run + "/config.json"), run + "/config.json");
    if (config.contains("train") && config["train"].contains("steps") &&
        config["train"]["steps"].is_number_integer())
      r.steps = config["train"]["steps"].get<int64_t>();
  }
  if (fs::exists(run + "/metrics.jsonl")) {
    const std::vector<train::MetricsRecord> log = train::read_metrics_jsonl(run + "/metrics.jsonl");
    std::vector<double> rates;
    for (const train::MetricsRecord& m : log) {
      r.step = m.step;
      r.train_loss = m.loss;
      if (m.eval_loss) r.eval_loss = m.eval_loss;
      if (m.eval_acc) r.eval_acc = m.eval_acc;
      if (m.tokens_per_s > 0) rates.push_back(m.tokens_per_s);
    }
    if (!rates.empty()) {
      std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
      r.tokens_per_s = rates[rates.size() / 2];  // the median: one slow window (a busy machine) does not rule
    }
  }
  if (fs::exists(train::model_checkpoint_path(run))) r.status = "interrupted";
  const std::vector<HeadScoresFile> history = read_score_history(run);
  r.task_curve = best_head_curve(history, &HeadScores::task);
  r.previous_token_curve = best_head_curve(history, &HeadScores::previous_token);
  r.induction_curve = best_head_curve(history, &HeadScores::induction);
  if (fs::exists(run + "/scores.json")) {
    const HeadScoresFile scores = read_head_scores(run + "/scores.json");
    if (r.steps > 0 && scores.step == r.steps) r.status = "finished";
    r.task = best_of(scores.heads, &HeadScores::task);
    r.previous_token = best_of(scores.heads, &HeadScores::previous_token);
    r.induction = best_of(scores.heads, &HeadScores::induction);
    r.first_token = best_of(scores.heads, &HeadScores::first_token);
    r.wall_seconds = scores.wall_seconds;
    r.phase_change = scores.phase_change ? *scores.phase_change : run_phase_change(run);
  }
  return r;
}

}  // namespace

SweepSummary collect_sweep(const std::string& out_dir) {
  const std::string path = out_dir + "/sweep.json";
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path +
                             ": no sweep manifest (run `attograd sweep SWEEP.json` or with "
                             "--print-commands first; it writes this file)");
  const ordered_json manifest = ordered_json::parse(io::read_text_file(path), nullptr, false);
  if (manifest.is_discarded()) throw std::runtime_error(path + ": malformed JSON");
  if (!manifest.is_object()) io::json_error(path, "", "expected an object");
  if (!manifest.contains("runs") || !manifest["runs"].is_array())
    io::json_error(path, "/runs", "expected an array");
  if (!manifest.contains("grid") || !manifest["grid"].is_object())
    io::json_error(path, "/grid", "expected an object");
  SweepSummary sum;
  sum.title = out_dir;
  sum.base = manifest.value("base", "");
  sum.grid = manifest["grid"];
  for (size_t i = 0; i < manifest["runs"].size(); ++i) {
    const ordered_json& run = manifest["runs"][i];
    const std::string p = "/runs/" + std::to_string(i);
    if (!run.is_object() || !run.contains("name") || !run["name"].is_string() ||
        run["name"].get<std::string>().empty() ||
        run["name"].get<std::string>().find('/') != std::string::npos)
      io::json_error(path, p + "/name", "expected a run folder name");
    if (!run.contains("settings") || !run["settings"].is_object())
      io::json_error(path, p + "/settings", "expected an object");
    sum.runs.push_back(read_run(out_dir, run["name"].get<std::string>(), run["settings"], sum.grid));
  }
  return sum;
}

void write_sweep_summary(const std::string& out_dir, const SweepSummary& summary) {
  io::write_text_file_atomically(out_dir + "/summary.json", sweep_summary_to_json(summary).dump(2) + "\n");
  io::write_text_file_atomically(out_dir + "/summary.csv", sweep_summary_csv(summary));
  io::write_text_file_atomically(out_dir + "/index.html", sweep_index_html(summary));
}

}  // namespace study
