#include "analysis/run_study.h"

#include <algorithm>
#include <filesystem>

#include "analysis/capture.h"
#include "analysis/circuits.h"
#include "analysis/head_scores.h"
#include "findings/patching_view.h"
#include "findings/phase_change.h"
#include "findings/report_html.h"
#include "findings/svg_heatmap.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"
#include "train/metrics_log.h"

namespace analysis {

Study::Study(const train::Task& task, const train::Config& config, const train::Batch& eval_set)
    : task_(task),
      config_(config),
      probes_(train::take_sequences(eval_set, config.output.probes)),
      score_set_(train::take_sequences(eval_set, 64)),
      repeated_(repeated_random_batch(task, config.seed, 32)) {}

void Study::dump_attention(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step) const {
  if (probes_.B == 0) return;
  findings::AttentionDump dump{step, capture_attention(model, task_, probes_)};
  const std::string stem = io::layout::attention_stem(run_dir, step);
  findings::write_attention_dump(stem + ".json", dump);
  // The SVG shows the first probe; the JSON (and report.html) hold all of them.
  findings::SvgOptions svg;
  svg.title = config_.name + ", step " + std::to_string(step) + ", probe 0";
  io::write_text_file_atomically(stem + ".svg", findings::svg_attention_grid(dump.probes[0], svg));
}

findings::HeadScoresFile Study::head_scores(const nn::CausalLM<float>& model, int64_t step) const {
  const std::vector<findings::Probe> probes = capture_attention(model, task_, score_set_);
  std::vector<std::vector<std::vector<int>>> ideal;
  for (const findings::Probe& p : probes)
    ideal.push_back(task_.ideal_keys(std::vector<int32_t>(p.ids.begin(), p.ids.end())));
  return findings::HeadScoresFile{
      step, analysis::compute_head_scores(probes, ideal, capture_attention(model, task_, repeated_))};
}

void Study::record_scores(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
                          double wall_seconds) const {
  findings::HeadScoresFile scores = head_scores(model, step);
  scores.wall_seconds = wall_seconds;
  findings::write_head_scores(io::layout::score_history_json(run_dir, step), scores);
}

std::string Study::finish(const nn::CausalLM<float>& model, const std::string& run_dir, int64_t step,
                          double wall_seconds) const {
  findings::HeadScoresFile scores = head_scores(model, step);
  scores.wall_seconds = wall_seconds;
  findings::write_head_scores(io::layout::score_history_json(run_dir, step),
                              scores);  // the last step belongs to the history too
  scores.phase_change = run_phase_change(run_dir);
  findings::write_head_scores(io::layout::scores_json(run_dir), scores);
  write_run_report(run_dir, config_.name);
  return "head scores at step " + std::to_string(step) + " (" + io::layout::scores_json("RUN") + "):\n" +
         findings::head_scores_table(scores.heads);
}

RunStudy::RunStudy(const train::Config& config, const std::string& run_dir)
    : config_(config),
      run_dir_(run_dir),
      task_(train::make_task(config.task, config.seed)),
      eval_set_(task_->eval_set(config.seed, config.train.eval_size)),
      study_(*task_, config_, eval_set_),
      measures_(config.output.measures_every > 0
                    ? std::make_unique<ProgressMeasures>(*task_, run_dir, config.output.measures_every)
                    : nullptr) {}

void RunStudy::on_start(const train::Config& config, int64_t first_step, int64_t params) {
  if (measures_) measures_->on_start(config, first_step, params);
}

double RunStudy::wall_seconds(int64_t step) {
  if (!earlier_seconds_) {
    earlier_seconds_ = 0.0;
    if (step == 0) {
      // A fresh run: scores recorded by an earlier run in this folder are not this run's history.
      std::error_code ignored;
      std::filesystem::remove_all(io::layout::score_history_dir(run_dir_), ignored);
    } else {
      // A resumed run: the time recorded at the last dump before the checkpoint it resumed from.
      for (const findings::HeadScoresFile& f : read_score_history(run_dir_))
        if (f.step < step && f.wall_seconds) earlier_seconds_ = *f.wall_seconds;
    }
  }
  return *earlier_seconds_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RunStudy::on_model(const nn::CausalLM<float>& model, int64_t step, bool finished) {
  const double wall = wall_seconds(step);
  if (measures_) measures_->on_model(model, step, finished);
  const bool dumped_now = train::every(step, config_.output.attention_every);
  if (!finished) {
    if (dumped_now) {
      study_.dump_attention(model, run_dir_, step);
      study_.record_scores(model, run_dir_, step, wall);
    }
    return;
  }
  // The last step is dumped even off the period, so the report always shows the final maps.
  if (!dumped_now) study_.dump_attention(model, run_dir_, step);
  score_table_ = study_.finish(model, run_dir_, step, wall);
  if (reads_fourier(*task_, config_)) {
    const findings::FourierReport fourier = write_fourier_files(model, *task_, config_, run_dir_, step);
    score_table_ += "\nFourier analysis at step " + std::to_string(step) + " (" +
                    io::layout::fourier_json("RUN") + "):\n" + findings::fourier_summary(fourier);
  }
  const findings::CircuitsResult circuits = write_circuits_files(
      model, *task_, config_, run_dir_, step, static_cast<size_t>(model.shape.n_layers) >= 2);
  score_table_ += "\ncircuits at step " + std::to_string(step) + " (" + io::layout::circuits_json("RUN") +
                  "):\n" + findings::circuits_table(circuits);
}

bool reads_fourier(const train::Task& task, const train::Config& config) {
  const train::TaskConfig& t = task.config();
  return (t.kind == "modadd" || t.kind == "modadd_bare") && t.length == 2 && t.vocab % 2 == 1 &&
         !config.model.attention_only;
}

findings::FourierReport write_fourier_files(const nn::CausalLM<float>& model, const train::Task& task,
                                            const train::Config& config, const std::string& run_dir,
                                            int64_t step) {
  const findings::FourierReport r = fourier_analysis(model, modular_addition(task), step);
  std::filesystem::create_directories(io::layout::fourier_dir(run_dir));
  io::write_text_file_atomically(io::layout::fourier_json(run_dir),
                                 findings::fourier_to_json(r).dump(1) + "\n");
  io::write_text_file_atomically(io::layout::fourier_svg(run_dir, "spectra"),
                                 findings::fourier_spectra_svg(r));
  io::write_text_file_atomically(io::layout::fourier_svg(run_dir, "neurons"),
                                 findings::fourier_neurons_svg(r));
  io::write_text_file_atomically(io::layout::fourier_svg(run_dir, "logits"), findings::fourier_logits_svg(r));
  if (std::filesystem::exists(io::layout::measures_jsonl(run_dir)))
    io::write_text_file_atomically(
        io::layout::fourier_svg(run_dir, "measures"),
        findings::measures_svg(findings::read_measures(io::layout::measures_jsonl(run_dir))));
  write_run_report(run_dir, config.name);
  return r;
}

findings::CircuitsResult run_circuits(const nn::CausalLM<float>& model, const train::Task& task,
                                      const train::Config& config, int64_t step, bool with_composition) {
  const train::Batch held_out = task.eval_set(config.seed, config.train.eval_size);
  const int positions = std::min({task.seq_len(), static_cast<int>(model.shape.max_len), kMaxPositionalMap});
  findings::CircuitsResult r = analyse_circuits(model, held_out, positions, with_composition);
  r.step = step;
  return r;
}

findings::CircuitsResult write_circuits_files(const nn::CausalLM<float>& model, const train::Task& task,
                                              const train::Config& config, const std::string& run_dir,
                                              int64_t step, bool with_composition) {
  const findings::CircuitsResult r = run_circuits(model, task, config, step, with_composition);
  findings::write_circuits(io::layout::circuits_json(run_dir), r);
  const std::string title = config.name + ", step " + std::to_string(step);
  if (!r.composition.empty())
    io::write_text_file_atomically(io::layout::composition_svg(run_dir),
                                   findings::svg_composition(r, title + ": composition scores"));
  if (!r.positional.empty())
    io::write_text_file_atomically(
        io::layout::positional_qk_svg(run_dir),
        findings::svg_positional(r, title + ": layer 0 positional QK (positions alone)"));
  write_run_report(run_dir, config.name);
  return r;
}

std::vector<findings::HeadScoresFile> read_score_history(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::vector<findings::HeadScoresFile> history;
  std::error_code ec;
  const std::string dir = io::layout::score_history_dir(run_dir);
  if (!fs::is_directory(dir, ec)) return history;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (io::layout::is_step_json(entry.path().filename().string()))
      history.push_back(findings::read_head_scores(entry.path().string()));
  }
  std::sort(
      history.begin(), history.end(),
      [](const findings::HeadScoresFile& a, const findings::HeadScoresFile& b) { return a.step < b.step; });
  return history;
}

findings::PhaseChange run_phase_change(const std::string& run_dir) {
  findings::Curve eval_loss;
  const std::string metrics = io::layout::metrics_jsonl(run_dir);
  if (std::filesystem::exists(metrics))
    for (const train::MetricsRecord& r : train::read_metrics_jsonl(metrics))
      if (r.eval_loss) eval_loss.push_back({double(r.step), *r.eval_loss});
  return findings::phase_change(read_score_history(run_dir), eval_loss);
}

namespace {

void read_saes_except(const std::string& run_dir, const std::string& replacing,
                      std::vector<findings::SaeEvalSummary>* saes, std::vector<std::string>* pages) {
  namespace fs = std::filesystem;
  std::vector<std::string> points;
  std::error_code ec;
  const std::string root = io::layout::sae_root(run_dir);
  if (fs::is_directory(root, ec))
    for (const auto& entry : fs::directory_iterator(root, ec))
      if (entry.is_directory(ec)) points.push_back(entry.path().filename().string());
  std::sort(points.begin(), points.end());
  for (const std::string& point : points) {
    const std::string dir = io::layout::sae_dir(run_dir, point), eval = io::layout::sae_eval_json(dir);
    if (!replacing.empty() && fs::equivalent(dir, replacing, ec)) continue;
    if (!fs::exists(eval, ec)) continue;  // not evaluated yet (training stopped, or still under way)
    saes->push_back(findings::sae_eval_from_json(io::parse_json(io::read_text_file(eval), eval), eval));
    const std::string page = io::layout::sae_features_html(dir);
    pages->push_back(fs::exists(page, ec) ? io::layout::relative_to_run(run_dir, page) : std::string());
  }
}

// The saved attribution graphs: each RUN/graphs/NAME/graph.json, by name, with its viewer page.
void read_graphs(const std::string& run_dir, std::vector<findings::GraphSummary>* graphs) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  const std::string root = io::layout::graphs_root(run_dir);
  if (fs::is_directory(root, ec))
    for (const auto& entry : fs::directory_iterator(root, ec))
      if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string dir = io::layout::graph_dir(run_dir, name), file = io::layout::graph_json(dir);
    if (!fs::exists(file, ec)) continue;
    findings::GraphSummary g =
        findings::graph_summary_from_json(io::parse_json(io::read_text_file(file), file), name, file);
    const std::string page = io::layout::graph_page(dir);
    g.page = fs::exists(page, ec) ? io::layout::relative_to_run(run_dir, page) : std::string();
    graphs->push_back(std::move(g));
  }
}

}  // namespace

void read_saes(const std::string& run_dir, std::vector<findings::SaeEvalSummary>* saes,
               std::vector<std::string>* pages) {
  read_saes_except(run_dir, "", saes, pages);
}

namespace {

// What RUN/report.html shows, read from the run folder's files; the SAE folder `replacing` is not read.
findings::ReportInputs read_report_inputs(const std::string& run_dir, const std::string& title,
                                          const std::string& replacing = "") {
  findings::ReportInputs in;
  in.title = title;
  const std::string metrics = io::layout::metrics_jsonl(run_dir);
  if (std::filesystem::exists(metrics))
    for (const train::MetricsRecord& r : train::read_metrics_jsonl(metrics))
      in.metrics.push_back({r.step, r.loss, r.tokens_per_s, r.eval_loss, r.eval_acc});
  const std::string scores = io::layout::scores_json(run_dir);
  if (std::filesystem::exists(scores)) in.scores = findings::read_head_scores(scores);
  in.dumps = findings::read_attention_dumps(io::layout::attention_dir(run_dir));
  in.score_history = read_score_history(run_dir);
  // Without recorded scores: computed from the dumps alone (no task score without ideal keys).
  if (in.score_history.empty()) {
    in.score_history_from_dumps = true;
    for (const findings::AttentionDump& d : in.dumps)
      in.score_history.push_back({d.step, compute_head_scores(d.probes, {}, d.probes)});
  }
  if (std::filesystem::exists(io::layout::circuits_json(run_dir)))
    in.circuits = findings::read_circuits(io::layout::circuits_json(run_dir));
  in.patchings = findings::read_patchings(io::layout::patching_dir(run_dir), &in.patching_names);
  in.lenses = findings::read_lenses(io::layout::lens_dir(run_dir), &in.lens_names);
  const std::string fourier = io::layout::fourier_json(run_dir);
  if (std::filesystem::exists(fourier)) {
    in.fourier =
        findings::fourier_from_json(train::parse_json_text(io::read_text_file(fourier), fourier), fourier);
    for (const char* name : {"spectra", "neurons", "logits"}) {
      const std::string svg = io::layout::fourier_svg(run_dir, name);
      if (std::filesystem::exists(svg)) in.fourier_svgs.push_back(io::read_text_file(svg));
    }
  }
  if (std::filesystem::exists(io::layout::measures_jsonl(run_dir)))
    in.measures = findings::read_measures(io::layout::measures_jsonl(run_dir));
  read_saes_except(run_dir, replacing, &in.saes, &in.sae_pages);
  read_graphs(run_dir, &in.graphs);
  const std::string tc_eval = io::layout::transcoders_eval_json(io::layout::transcoders_root(run_dir));
  if (std::filesystem::exists(tc_eval)) {
    in.transcoders = io::parse_json(io::read_text_file(tc_eval), tc_eval);
    if (in.transcoders.is_object() && in.transcoders.value("layers", nlohmann::json()).is_array())
      for (const nlohmann::json& l : in.transcoders["layers"]) {
        const nlohmann::json layer = l.is_object() ? l.value("layer", nlohmann::json()) : nlohmann::json();
        std::string page;
        if (layer.is_number_integer()) {
          const std::string file = io::layout::transcoder_features_html(
              io::layout::transcoder_dir(io::layout::transcoders_root(run_dir), layer.get<int>()));
          if (std::filesystem::exists(file)) page = io::layout::relative_to_run(run_dir, file);
        }
        in.transcoder_pages.push_back(page);
      }
  }
  return in;
}

}  // namespace

void write_run_report(const std::string& run_dir, const std::string& title) {
  findings::write_report_html(io::layout::report_html(run_dir), read_report_inputs(run_dir, title));
}

void check_run_report(const std::string& run_dir, const std::string& replacing) {
  (void)read_report_inputs(run_dir, "", replacing);
  io::check_replaceable(io::layout::report_html(run_dir));
}

}  // namespace analysis
