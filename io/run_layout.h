// The run folder's layout: the path of every file and folder a training run and a sweep hold, each named
// once here with what it holds. Every layer that reads or writes a run folder (train/, analysis/, runner/,
// cli/, ...) takes its paths from these functions; docs/architecture.md "The run folder" states the same
// layout for users, and the tests check it from outside with literal paths. What a file contains is its
// writer's business (train/checkpoint.h, train/metrics_log.h, findings/head_scores.h, ...), not this file's.
//
// Adding a file to a run: one function here with a comment, its writer and its readers call it, and
// run_entries() lists it when it sits at the top of the run folder.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace io::layout {

// "step-000500": the stem of a step's files in attention/, scores/ and checkpoint/ (at least six digits,
// zero-padded, so the names sort by step).
inline std::string step_stem(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

// Whether a file name is a step's JSON file, "step-NNNNNN.json".
inline bool is_step_json(const std::string& file_name) {
  const std::string prefix = "step-", suffix = ".json";
  return file_name.size() > prefix.size() + suffix.size() && file_name.rfind(prefix, 0) == 0 &&
         file_name.compare(file_name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---- A run folder RUN: `attograd train` writes it; eval, forward, attend, compare, ablate, patch and
// circuits read it.

// RUN/config.json: the resolved config, every default filled in (docs/configs.md).
inline std::string config_json(const std::string& run) {
  return run + "/config.json";
}

// RUN/metrics.jsonl: one JSON object per logged step, appended as training goes (train/metrics_log.h).
inline std::string metrics_jsonl(const std::string& run) {
  return run + "/metrics.jsonl";
}

// RUN/checkpoint/: the last checkpoint, a model file and the optimiser file of its step (train/checkpoint.h).
inline std::string checkpoint_dir(const std::string& run) {
  return run + "/checkpoint";
}

// RUN/checkpoint/model.safetensors: every parameter under its PyTorch name; its metadata holds the
// resolved config and the step.
inline std::string model_checkpoint(const std::string& run) {
  return checkpoint_dir(run) + "/model.safetensors";
}

// RUN/checkpoint/optimizer-NNNNNN.safetensors: AdamW's moments and the data generator's state at step
// NNNNNN, the model file's step.
inline const char* const optimizer_checkpoint_prefix = "optimizer-";
inline std::string optimizer_checkpoint(const std::string& run, int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%06lld.safetensors", optimizer_checkpoint_prefix,
                static_cast<long long>(step));
  return checkpoint_dir(run) + "/" + buf;
}

// RUN/attention/: the attention maps of the probe inputs at each dump, step-NNNNNN.json (all probes) and
// step-NNNNNN.svg (probe 0 as a grid of heatmaps).
inline std::string attention_dir(const std::string& run) {
  return run + "/attention";
}
// RUN/attention/step-NNNNNN, without its extension.
inline std::string attention_stem(const std::string& run, int64_t step) {
  return attention_dir(run) + "/" + step_stem(step);
}

// RUN/scores/: every head's scores at each dump, step-NNNNNN.json, in scores.json's format with the wall
// time; the history behind report.html's score curves and the phase-change steps.
inline std::string score_history_dir(const std::string& run) {
  return run + "/scores";
}
inline std::string score_history_json(const std::string& run, int64_t step) {
  return score_history_dir(run) + "/" + step_stem(step) + ".json";
}

// RUN/scores.json: every head's scores at the last step, the phase-change steps and, once `attograd
// ablate` ran, each head's ablation results.
inline std::string scores_json(const std::string& run) {
  return run + "/scores.json";
}

// RUN/circuits.json: what the weights say (composition, copying, positional QK) and the direct logit
// attribution, at the last step (docs/circuits.md).
inline std::string circuits_json(const std::string& run) {
  return run + "/circuits.json";
}

// RUN/circuits/: circuits.json's pictures, composition.svg (models of two layers or more) and
// positional_qk.svg.
inline std::string circuits_dir(const std::string& run) {
  return run + "/circuits";
}
inline std::string composition_svg(const std::string& run) {
  return circuits_dir(run) + "/composition.svg";
}
inline std::string positional_qk_svg(const std::string& run) {
  return circuits_dir(run) + "/positional_qk.svg";
}

// RUN/patching/: NAME.json and NAME.svg for each `attograd patch --save NAME`.
inline std::string patching_dir(const std::string& run) {
  return run + "/patching";
}
// RUN/patching/NAME, without its extension.
inline std::string patching_stem(const std::string& run, const std::string& name) {
  return patching_dir(run) + "/" + name;
}

// RUN/split.json: a finite dataset's split (train/task.h): {"id": "line" or "index", "train": [...],
// "heldout": [...]}, which sequences were trained on and which held out; absent for a stream.
inline std::string split_json(const std::string& run) {
  return run + "/split.json";
}

// RUN/lens/: NAME.json and NAME.svg for each `attograd lens --save NAME`.
inline std::string lens_dir(const std::string& run) {
  return run + "/lens";
}
// RUN/lens/NAME, without its extension.
inline std::string lens_stem(const std::string& run, const std::string& name) {
  return lens_dir(run) + "/" + name;
}

// RUN/measures.jsonl: the progress measures of a modular-addition run (output.measures_every), one JSON
// object per measured step (findings/fourier_view.h).
inline std::string measures_jsonl(const std::string& run) {
  return run + "/measures.jsonl";
}

// RUN/fourier/: what `attograd fourier` writes: fourier.json and the SVGs named below.
inline std::string fourier_dir(const std::string& run) {
  return run + "/fourier";
}
inline std::string fourier_json(const std::string& run) {
  return fourier_dir(run) + "/fourier.json";
}
// RUN/fourier/NAME.svg for NAME spectra, neurons, logits and measures.
inline std::string fourier_svg(const std::string& run, const std::string& name) {
  return fourier_dir(run) + "/" + name + ".svg";
}

// RUN/sae/: the SAEs trained on the run's activations, one folder per hook point.
inline std::string sae_root(const std::string& run) {
  return run + "/sae";
}
// RUN/sae/POINT/: `attograd sae`'s default output folder for an SAE trained at a hook point.
inline std::string sae_dir(const std::string& run, const std::string& point) {
  return sae_root(run) + "/" + point;
}
// DIR/eval.json, DIR an SAE's folder (sae_dir, or `sae --out DIR`): the SAE's evaluation (docs/sae.md);
// the run report lists every RUN/sae/POINT/eval.json.
inline std::string sae_eval_json(const std::string& sae_folder) {
  return sae_folder + "/eval.json";
}
// DIR/features.html: the page of the SAE's features and their top examples; the run report links it.
inline std::string sae_features_html(const std::string& sae_folder) {
  return sae_folder + "/features.html";
}
// DIR/features.json: every feature's density, top examples and logit effects (docs/sae.md).
inline std::string sae_features_json(const std::string& sae_folder) {
  return sae_folder + "/features.json";
}
// DIR/sae.safetensors: the trained SAE (W_enc, b_enc, W_dec, b_dec, SAELens's names; the config in its
// metadata).
inline std::string sae_model(const std::string& sae_folder) {
  return sae_folder + "/sae.safetensors";
}
// DIR/checkpoint.safetensors: the SAE's training state (parameters, AdamW, fire counts) for `--resume`.
inline std::string sae_checkpoint(const std::string& sae_folder) {
  return sae_folder + "/checkpoint.safetensors";
}

// RUN/transcoders/: `attograd transcoder`'s default folder, one subfolder per layer (the `--out DIR` of
// transcoder and `graph --transcoders DIR` name such a folder).
inline std::string transcoders_root(const std::string& run) {
  return run + "/transcoders";
}
// DIR/L/: layer L's transcoder (reads blocks.L's MLP input, writes blocks.L.mlp.out).
inline std::string transcoder_dir(const std::string& folder, int layer) {
  return folder + "/" + std::to_string(layer);
}
// DIR/L/transcoder.safetensors: the trained transcoder (W_enc, b_enc, W_dec, b_dec, W_skip with a skip;
// SAELens's names; metadata architecture, hook_name, hook_name_out, config), reading raw activations.
inline std::string transcoder_model(const std::string& layer_folder) {
  return layer_folder + "/transcoder.safetensors";
}
// DIR/L/checkpoint.safetensors: its training state, for `transcoder --resume`.
inline std::string transcoder_checkpoint(const std::string& layer_folder) {
  return layer_folder + "/checkpoint.safetensors";
}
// DIR/L/features.json and DIR/L/features.html: layer L's feature pages (top examples, logit effects), as
// an SAE's.
inline std::string transcoder_features_json(const std::string& layer_folder) {
  return layer_folder + "/features.json";
}
inline std::string transcoder_features_html(const std::string& layer_folder) {
  return layer_folder + "/features.html";
}
// DIR/checkpoint.safetensors: a cross-layer transcoder's training state (every layer's), for `transcoder
// --cross-layer --resume`; its layers' files are DIR/L/transcoder.safetensors as the per-layer ones'.
inline std::string transcoders_clt_checkpoint(const std::string& folder) {
  return folder + "/checkpoint.safetensors";
}
// DIR/eval.json: every layer's evaluation and the CE with every MLP replaced (docs/graphs.md).
inline std::string transcoders_eval_json(const std::string& folder) {
  return folder + "/eval.json";
}

// RUN/graphs/: the attribution graphs (`attograd graph`), one folder per graph.
inline std::string graphs_root(const std::string& run) {
  return run + "/graphs";
}
// RUN/graphs/NAME/: one graph's folder.
inline std::string graph_dir(const std::string& run, const std::string& name) {
  return graphs_root(run) + "/" + name;
}
// DIR/graph.json: the pruned graph in Neuronpedia's graph schema (docs/graphs.md).
inline std::string graph_json(const std::string& graph_folder) {
  return graph_folder + "/graph.json";
}
// DIR/graph.html: the graph viewer, one self-contained page (findings/graph_html.h).
inline std::string graph_page(const std::string& graph_folder) {
  return graph_folder + "/graph.html";
}
// DIR/adjacency.npy: the unpruned graph's full direct-effect matrix, float64 (targets x sources).
inline std::string graph_matrix(const std::string& graph_folder) {
  return graph_folder + "/adjacency.npy";
}
// RUN/report.html: one self-contained page of everything above.
inline std::string report_html(const std::string& run) {
  return run + "/report.html";
}

// `path`, one of the paths above built on `run`, relative to the run folder ("sae/POINT/features.html"):
// how report.html links the run's other pages, so the folder can move.
inline std::string relative_to_run(const std::string& run, const std::string& path) {
  const std::string prefix = run + "/";
  return path.compare(0, prefix.size(), prefix) == 0 ? path.substr(prefix.size()) : path;
}

// RUN/imported.json: written by `attograd import` (imports/import_model.h) in a run it made from another
// program's model: the family, the source folder and files, their dtypes and the tokenizer files copied.
inline std::string imported_json(const std::string& run) {
  return run + "/imported.json";
}

// RUN/.attograd-run: the marker that makes a folder a run folder, written when `attograd train` (or a
// sweep, for its runs) creates the run. `train` writes into a folder that holds it or is empty, and
// nowhere else; `--overwrite` removes run_entries() and nothing else.
inline std::string run_marker(const std::string& run) {
  return run + "/.attograd-run";
}

// DIR/.attograd-lock: the file every writer of a run folder (train, ablate, patch --save, circuits) or a
// sweep folder (sweep, sweep collect) holds an advisory flock on while it writes; it holds the holder's
// pid. The lock dies with its process, so a killed writer leaves no stale lock.
inline std::string folder_lock(const std::string& dir) {
  return dir + "/.attograd-lock";
}

// The folders inside RUN that a training run and the study tools write; the only places, with RUN
// itself, where stale temporary files are looked for.
inline std::vector<std::string> run_subfolders(const std::string& run) {
  return {checkpoint_dir(run),   attention_dir(run), score_history_dir(run), patching_dir(run),
          circuits_dir(run),     lens_dir(run),      fourier_dir(run),       sae_root(run),
          transcoders_root(run), graphs_root(run)};
}

// The entries at the top of RUN that a training run and the study tools write (`train --overwrite`
// removes them, and nothing else, before a new run starts).
inline std::vector<std::string> run_entries(const std::string& run) {
  std::vector<std::string> entries = run_subfolders(run);
  for (const std::string& file :
       {metrics_jsonl(run), config_json(run), scores_json(run), report_html(run), circuits_json(run),
        split_json(run), measures_jsonl(run), imported_json(run)})
    entries.push_back(file);
  return entries;
}

// ---- A sweep folder OUT: `attograd sweep` writes it, with one run folder per grid point.

// OUT/sweep.json: the manifest: the base config, the grid, and each run's folder name and settings.
inline std::string sweep_manifest(const std::string& out) {
  return out + "/sweep.json";
}

// OUT/NAME: the run folder of the run called NAME in the manifest.
inline std::string sweep_run(const std::string& out, const std::string& name) {
  return out + "/" + name;
}

// RUN/train.log: what `attograd train` printed, when the sweep started the run.
inline std::string train_log(const std::string& run) {
  return run + "/train.log";
}

// RUN/.attograd-slurm-job: the Slurm array task that owns the run, as JSON {"job_name", "task", "job_id"}:
// `sweep --slurm` writes it (no job id: queued) for each run of the script it generates; the task rewrites
// it with its job id when it starts and removes it when it ends. A sweep started or generated meanwhile
// leaves the run to that job while Slurm has it queued or running (io/run_ownership.h).
inline std::string slurm_owner(const std::string& run) {
  return run + "/.attograd-slurm-job";
}

// OUT/slurm-JOB_TASK.log: a Slurm array task's output, named by Slurm from this pattern (--slurm).
inline std::string slurm_log_pattern(const std::string& out) {
  return out + "/slurm-%A_%a.log";
}

// OUT/summary.json, OUT/summary.csv, OUT/index.html: the sweep's summary, one row per run, as JSON, CSV
// and a page of curves linking each run's report.html.
inline std::string summary_json(const std::string& out) {
  return out + "/summary.json";
}
inline std::string summary_csv(const std::string& out) {
  return out + "/summary.csv";
}
inline std::string sweep_index_html(const std::string& out) {
  return out + "/index.html";
}

// ---- Files of the tools that read no run.

// tms-nN-mM.svg in the working folder: `attograd tms`'s figure when no file is given.
inline std::string tms_figure(int n, int m) {
  return "tms-n" + std::to_string(n) + "-m" + std::to_string(m) + ".svg";
}

// ---- Temporary files.

// PATH.tmp.PID.N: io::AtomicFile's file beside PATH while it is written, renamed over PATH when complete;
// a writer killed mid-write leaves it behind, and the next run removes it (from RUN and run_subfolders()
// only).
inline std::string temp_file(const std::string& path, long pid, unsigned long n) {
  return path + ".tmp." + std::to_string(pid) + "." + std::to_string(n);
}
inline bool is_temp_file(const std::string& file_name) {
  return file_name.find(".tmp.") != std::string::npos;
}

}  // namespace io::layout
