#include "runner/sweep_collect.h"

#include <algorithm>
#include <filesystem>

#include "analysis/run_study.h"
#include "autograd/timing.h"
#include "findings/phase_change.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "runner/run_state.h"
#include "train/checkpoint.h"
#include "train/metrics_log.h"

namespace runner {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::optional<findings::BestHead> best_of(const std::vector<findings::HeadScores>& heads,
                                          double findings::HeadScores::*field) {
  std::optional<findings::BestHead> best;
  for (const findings::HeadScores& h : heads)
    if (std::isfinite(h.*field) && (!best || h.*field > best->value))
      best = findings::BestHead{h.layer, h.head, h.*field};
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

findings::SweepRunSummary read_run(const std::string& dir, const std::string& name,
                                   const ordered_json& settings, const ordered_json& grid) {
  namespace fs = std::filesystem;
  findings::SweepRunSummary r;
  r.name = name;
  r.settings = settings;
  r.setting = setting_label(settings, grid);
  const std::string run = io::layout::sweep_run(dir, name);
  std::error_code ec;
  if (!fs::is_directory(run, ec)) {
    r.status = "missing";
    return r;
  }
  // The state as the run's files give it (runner/run_state.h): a folder without a checkpoint has started,
  // one with a checkpoint short of train.steps was interrupted.
  const findings::RunState state = run_state(run, RunStateOptions{false});
  r.status = state.state == "finished" ? "finished" : state.state == "partial" ? "interrupted" : "started";
  r.steps = state.steps.value_or(0);
  // What a run keeps is its checkpoint: a resume starts there and cuts metrics.jsonl back to its step. So
  // a run is summarised as of its checkpoint's step, from the records and dumps up to that step.
  const std::optional<int64_t> checkpoint_step = state.step;
  if (checkpoint_step) r.step = *checkpoint_step;
  const auto kept = [&](int64_t step) { return !checkpoint_step || step <= *checkpoint_step; };
  if (fs::exists(io::layout::metrics_jsonl(run))) {
    const std::vector<train::MetricsRecord> log = train::read_metrics_jsonl(io::layout::metrics_jsonl(run));
    std::vector<double> rates;
    for (const train::MetricsRecord& m : log) {
      if (!kept(m.step)) break;
      if (!checkpoint_step) r.step = m.step;
      r.train_loss = m.loss;
      if (m.eval_loss) r.eval_loss = m.eval_loss;
      if (m.eval_acc) r.eval_acc = m.eval_acc;
      if (m.tokens_per_s > 0) rates.push_back(m.tokens_per_s);
    }
    // The median: one slow window (a busy machine) does not rule.
    if (!rates.empty()) r.tokens_per_s = ag::median(rates);
  }
  std::vector<findings::HeadScoresFile> history = analysis::read_score_history(run);
  history.erase(std::remove_if(history.begin(), history.end(),
                               [&](const findings::HeadScoresFile& f) { return !kept(f.step); }),
                history.end());
  r.task_curve = findings::best_head_curve(history, &findings::HeadScores::task);
  r.previous_token_curve = findings::best_head_curve(history, &findings::HeadScores::previous_token);
  r.induction_curve = findings::best_head_curve(history, &findings::HeadScores::induction);
  if (fs::exists(io::layout::scores_json(run))) {
    const findings::HeadScoresFile scores = findings::read_head_scores(io::layout::scores_json(run));
    r.task = best_of(scores.heads, &findings::HeadScores::task);
    r.previous_token = best_of(scores.heads, &findings::HeadScores::previous_token);
    r.induction = best_of(scores.heads, &findings::HeadScores::induction);
    r.first_token = best_of(scores.heads, &findings::HeadScores::first_token);
    r.duplicate_token = best_of(scores.heads, &findings::HeadScores::duplicate_token);  // none: older run
    r.wall_seconds = scores.wall_seconds;
    r.phase_change = scores.phase_change ? *scores.phase_change : analysis::run_phase_change(run);
  }
  return r;
}

}  // namespace

findings::SweepSummary collect_sweep(const std::string& out_dir) {
  const std::string path = io::layout::sweep_manifest(out_dir);
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path +
                             ": no sweep manifest (run `attograd sweep SWEEP.json` or with "
                             "--print-commands first; it writes this file)");
  const ordered_json manifest = io::parse_ordered_json_text(io::read_text_file(path), path);
  if (!manifest.is_object()) io::json_error(path, "", "expected an object");
  if (!manifest.contains("runs") || !manifest["runs"].is_array())
    io::json_error(path, "/runs", "expected an array");
  if (!manifest.contains("grid") || !manifest["grid"].is_object())
    io::json_error(path, "/grid", "expected an object");
  findings::SweepSummary sum;
  sum.title = out_dir;
  if (manifest.contains("base") && !manifest["base"].is_string())
    io::json_error(path, "/base", std::string("expected a string, got ") + manifest["base"].type_name());
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
    // A run whose files cannot be read (a torn line, a hand-edited file) is reported as such; the rest
    // are still summarised.
    const std::string name = run["name"].get<std::string>();
    try {
      sum.runs.push_back(read_run(out_dir, name, run["settings"], sum.grid));
    } catch (const std::runtime_error& e) {
      findings::SweepRunSummary r;
      r.name = name;
      r.settings = run["settings"];
      r.setting = setting_label(run["settings"], sum.grid);
      r.status = "unreadable";
      r.problem = e.what();
      sum.runs.push_back(std::move(r));
    }
  }
  return sum;
}

void write_sweep_summary(const std::string& out_dir, const findings::SweepSummary& summary) {
  io::write_text_file_atomically(io::layout::summary_json(out_dir),
                                 findings::sweep_summary_to_json(summary).dump(2) + "\n");
  io::write_text_file_atomically(io::layout::summary_csv(out_dir), findings::sweep_summary_csv(summary));
  io::write_text_file_atomically(io::layout::sweep_index_html(out_dir), findings::sweep_index_html(summary));
}

}  // namespace runner
