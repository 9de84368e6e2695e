#include "train/study.h"

#include <filesystem>

#include "train/report_html.h"
#include "train/svg_heatmap.h"
#include "train/text_file.h"
#include "train/trainer.h"

namespace ag {

Study::Study(const Task& task, const Config& config, const Batch& eval_set)
    : task_(task),
      config_(config),
      probes_(take_sequences(eval_set, config.output.probes)),
      score_set_(take_sequences(eval_set, 64)),
      repeated_(repeated_random_batch(task, config.seed, 32)) {}

void Study::dump_attention(nn::CausalLM<float>& model, const std::string& run_dir, int64_t step) const {
  if (probes_.B == 0) return;
  AttentionDump dump{step, capture_attention(model, task_, probes_)};
  const std::string stem = run_dir + "/attention/" + attention_step_name(step);
  write_attention_dump(stem + ".json", dump);
  // The SVG shows the first probe; the JSON (and report.html) hold all of them.
  SvgOptions svg;
  svg.title = config_.name + ", step " + std::to_string(step) + ", probe 0";
  write_text_file_atomically(stem + ".svg", svg_attention_grid(dump.probes[0], svg));
}

HeadScoresFile Study::head_scores(nn::CausalLM<float>& model, int64_t step) const {
  const std::vector<Probe> probes = capture_attention(model, task_, score_set_);
  std::vector<std::vector<std::vector<int>>> ideal;
  for (const Probe& p : probes)
    ideal.push_back(task_.ideal_keys(std::vector<int32_t>(p.ids.begin(), p.ids.end())));
  return HeadScoresFile{step, compute_head_scores(probes, ideal, capture_attention(model, task_, repeated_))};
}

void Study::finish(nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
                   TrainObserver& observer) const {
  const HeadScoresFile scores = head_scores(model, step);
  write_head_scores(run_dir + "/scores.json", scores);
  observer.on_message("head scores at step " + std::to_string(step) + " (RUN/scores.json):\n" +
                      head_scores_table(scores.heads));
  write_run_report(run_dir, config_.name);
}

void write_run_report(const std::string& run_dir, const std::string& title) {
  ReportInputs in;
  in.title = title;
  const std::string metrics = run_dir + "/metrics.jsonl";
  if (std::filesystem::exists(metrics)) in.metrics = read_metrics_jsonl(metrics);
  const std::string scores = run_dir + "/scores.json";
  if (std::filesystem::exists(scores)) in.scores = read_head_scores(scores);
  in.dumps = read_attention_dumps(run_dir + "/attention");
  write_report_html(run_dir + "/report.html", in);
}

}  // namespace ag
