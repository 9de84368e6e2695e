#include "dictionary/transcoder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "analysis/run_study.h"
#include "dictionary/clt.h"
#include "dictionary/sae_eval.h"
#include "dictionary/sae_source.h"
#include "dictionary/sae_tool.h"
#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/hooks.h"
#include "nn/model_view.h"
#include "train/safetensors.h"

namespace dictionary {

namespace {

// Sequences per forward in the evaluation.
constexpr int kChunk = 32;

std::string out_point(int layer) {
  return "blocks." + std::to_string(layer) + ".mlp.out";
}

// The layers of "0,1" (each once, in the order given), checked against the model: every one has an MLP.
std::vector<int> parse_layers(const nn::CausalLM<float>& model, const std::string& text) {
  const int n = static_cast<int>(model.shape.n_layers);
  const nn::ModelView<float> mv = nn::view(model);
  std::vector<int> layers;
  if (text.empty()) {
    for (int l = 0; l < n; ++l)
      if (mv.layers[l].has_mlp) layers.push_back(l);
    if (layers.empty())
      throw analysis::RequestError("layers: the model is attention-only: no MLP to replace");
    return layers;
  }
  std::stringstream in(text);
  std::string word;
  while (std::getline(in, word, ',')) {
    size_t used = 0;
    int l = -1;
    try {
      l = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != word.size() || l < 0 || l >= n)
      throw analysis::RequestError("layers: '" + word + "' is not a layer of this model (0.." +
                                   std::to_string(n - 1) + ")");
    if (!mv.layers[l].has_mlp) throw analysis::RequestError("layers: layer " + word + " has no MLP");
    if (std::find(layers.begin(), layers.end(), l) != layers.end())
      throw analysis::RequestError("layers: layer " + word + " is given twice");
    layers.push_back(l);
  }
  if (layers.empty()) throw analysis::RequestError("layers: expected layers such as 0,1");
  return layers;
}

// The kept tokens of a batch (not padding, not position 0 with skip_bos), as flat indices b * T + t.
std::vector<int64_t> kept_tokens(const train::Batch& b, bool skip_bos) {
  std::vector<int64_t> kept;
  for (int s = 0; s < b.B; ++s)
    for (int t = skip_bos ? 1 : 0; t < b.T; ++t) {
      const int64_t i = static_cast<int64_t>(s) * b.T + t;
      if (b.is_padding.empty() || !b.is_padding[i]) kept.push_back(i);
    }
  return kept;
}

// The rows `kept` of a (B, T, D) activation, as (n, D).
ag::Tensor<float> gather(const ag::Tensor<float>& a, const std::vector<int64_t>& kept) {
  const int64_t D = a.size(2), n = static_cast<int64_t>(kept.size());
  ag::Tensor<float> x = ag::Tensor<float>::empty({n, D});
  for (int64_t r = 0; r < n; ++r)
    std::copy(a.data() + kept[r] * D, a.data() + (kept[r] + 1) * D, x.data() + r * D);
  return x;
}

ag::Tensor<float> features_of(const SaeParams<float>& p, const SaeConfig& c, const ag::Tensor<float>& x) {
  ag::NoGradScope no_grad;
  return transcoder_encode(p, x, c.activation, c.k);
}

}  // namespace

std::string transcoder_in_point(const nn::CausalLM<float>& model, int layer) {
  const nn::ReadSite<float> site = nn::view(model).layers.at(static_cast<size_t>(layer)).mlp_in;
  return nn::hook_name(site.norm.normalises ? site.norm.out_point : site.input, static_cast<size_t>(layer));
}

std::vector<SaeParams<float>> load_transcoders(const nn::CausalLM<float>& model, const std::string& folder) {
  std::vector<SaeParams<float>> out(static_cast<size_t>(model.shape.n_layers));
  const int64_t D = model.shape.d_model;
  const nn::ModelView<float> mv = nn::view(model);
  for (size_t l = 0; l < mv.layers.size(); ++l) {
    if (!mv.layers[l].has_mlp) continue;
    const std::string path =
        io::layout::transcoder_model(io::layout::transcoder_dir(folder, static_cast<int>(l)));
    if (!std::filesystem::exists(path))
      throw analysis::RequestError("transcoders: " + path + ": missing (train it with attograd transcoder)");
    out[l] = load_sae(path);
    if (!out[l].transcoder || out[l].d_in() != D || out[l].d_out() != D)
      throw analysis::RequestError("transcoders: " + path +
                                   ": expected a transcoder reading and writing d_model " +
                                   std::to_string(D));
  }
  // Cross-layer: every layer's, each writing to its own MLP output and every later one.
  const int64_t L = static_cast<int64_t>(out.size());
  bool cross = false;
  for (int64_t l = 0; l < L; ++l) cross = cross || out[l].writes > 1;
  for (int64_t l = 0; l < L && cross; ++l)
    if (!out[l].W_enc.defined() || out[l].writes != L - l)
      throw analysis::RequestError(
          "transcoders: " +
          io::layout::transcoder_model(io::layout::transcoder_dir(folder, static_cast<int>(l))) +
          ": expected layer " + std::to_string(l) + " of a cross-layer transcoder, writing to " +
          std::to_string(L - l) + " MLP outputs (the folder mixes kinds)");
  return out;
}

findings::TranscoderEval evaluate_transcoders(const nn::CausalLM<float>& model,
                                              const std::vector<SaeParams<float>>& transcoders,
                                              const SaeConfig& config, const train::Batch& held_out) {
  findings::TranscoderEval e;
  const int L = static_cast<int>(model.shape.n_layers);
  struct Stats {
    std::vector<double> sum_y;
    double sq_y = 0, sq_err = 0, l0 = 0;
    std::vector<int64_t> active;
  };
  std::vector<Stats> stats(L);
  for (int l = 0; l < L; ++l) {
    if (!transcoders[l].W_enc.defined()) continue;
    stats[l].sum_y.assign(transcoders[l].d_out(), 0.0);
    stats[l].active.assign(transcoders[l].d_sae(), 0);
  }
  SplicedLoss loss;
  for (int b0 = 0; b0 < held_out.B; b0 += kChunk) {
    const train::Batch chunk = slice(held_out, b0, std::min(held_out.B, b0 + kChunk));
    const std::vector<int64_t> kept = kept_tokens(chunk, config.skip_bos);
    const int64_t n = static_cast<int64_t>(kept.size());
    e.tokens += n;
    ag::NoGradScope no_grad;
    // Clean: every layer's transcoder on the clean model's MLP input and output.
    nn::Hooks<float> clean_hooks;
    for (int l = 0; l < L; ++l)
      if (transcoders[l].W_enc.defined()) {
        clean_hooks.capture(transcoder_in_point(model, l));
        clean_hooks.capture(out_point(l));
      }
    const ag::Tensor<float> clean =
        model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, &clean_hooks);
    std::vector<ag::Tensor<float>> xs(L), fs(L);
    for (int l = 0; l < L && n > 0; ++l)
      if (transcoders[l].W_enc.defined()) {
        xs[l] = gather(clean_hooks.captured(transcoder_in_point(model, l)), kept);
        fs[l] = features_of(transcoders[l], config, xs[l]);
      }
    for (int l = 0; l < L && n > 0; ++l) {
      const SaeParams<float>& p = transcoders[l];
      if (!p.W_enc.defined()) continue;
      const ag::Tensor<float> y = gather(clean_hooks.captured(out_point(l)), kept);
      const ag::Tensor<float> y_hat = predict_mlp_out(transcoders, l, fs, xs[l]);
      const ag::Tensor<float>& f = fs[l];
      Stats& s = stats[l];
      const int64_t D = p.d_out(), M = p.d_sae();
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t k = 0; k < D; ++k) {
          const double yv = y.data()[r * D + k], d = y_hat.data()[r * D + k] - yv;
          s.sq_err += d * d;
          s.sum_y[k] += yv;
          s.sq_y += yv * yv;
        }
        for (int64_t j = 0; j < M; ++j) {
          const int64_t on = f.data()[r * M + j] > 0;
          s.active[j] += on;
          s.l0 += static_cast<double>(on);
        }
      }
    }
    // Every MLP replaced at once (mode 0), or zeroed (mode 1), at the kept tokens.
    ag::Tensor<float> replaced[2];
    for (int mode = 0; mode < 2; ++mode) {
      nn::Hooks<float> hooks;
      std::vector<ag::Tensor<float>> inputs(L), features(L);
      for (int l = 0; l < L; ++l) {
        if (!transcoders[l].W_enc.defined()) continue;
        hooks.add(transcoder_in_point(model, l), [&inputs, l](const ag::Tensor<float>& v) {
          inputs[l] = v;
          return v;
        });
        hooks.add(out_point(l), [&, l, mode](const ag::Tensor<float>& v) {
          ag::Tensor<float> w = v.detach();
          const int64_t D = w.size(2);
          if (mode == 1) {
            for (int64_t i : kept) std::fill(w.data() + i * D, w.data() + (i + 1) * D, 0.f);
            return w;
          }
          if (kept.empty()) return w;
          // The features of the layers below were computed from their inputs in this same forward.
          const ag::Tensor<float> x = gather(inputs[l], kept);
          features[l] = features_of(transcoders[l], config, x);
          const ag::Tensor<float> y_hat = predict_mlp_out(transcoders, l, features, x);
          for (int64_t r = 0; r < n; ++r)
            std::copy(y_hat.data() + r * D, y_hat.data() + (r + 1) * D, w.data() + kept[r] * D);
          return w;
        });
      }
      replaced[mode] = model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, &hooks);
    }
    loss.add(chunk.targets, clean, replaced[0], replaced[1]);
  }
  if (e.tokens == 0)
    throw analysis::RequestError("the held-out sequences have no token to evaluate the transcoders on");
  const double n = static_cast<double>(e.tokens);
  for (int l = 0; l < L; ++l) {
    const SaeParams<float>& p = transcoders[l];
    if (!p.W_enc.defined()) continue;
    const Stats& s = stats[l];
    findings::TranscoderLayerEval le;
    le.layer = l;
    le.in_point = transcoder_in_point(model, l);
    le.out_point = out_point(l);
    le.d_in = p.d_in();
    le.d_out = p.d_out();
    le.d_sae = p.d_sae();
    le.skip = p.W_skip.defined();
    double total_var = s.sq_y;
    for (double v : s.sum_y) total_var -= v * v / n;
    le.mse = s.sq_err / (n * p.d_out());
    le.explained_variance = total_var > 0 ? 1 - s.sq_err / total_var : 0;
    le.l0 = s.l0 / n;
    le.dead = std::count(s.active.begin(), s.active.end(), 0);
    e.layers.push_back(le);
  }
  for (const SaeParams<float>& p : transcoders) e.cross_layer = e.cross_layer || p.writes > 1;
  const SplicedLoss::Means m = loss.means();
  e.ce_clean = m.clean;
  e.ce_replaced = m.spliced;
  e.ce_zero_ablation = m.zeroed;
  e.kl = m.kl;
  e.ce_loss_recovered = m.recovered;
  return e;
}

std::vector<std::vector<findings::SaeFeature>> transcoder_features(
    const nn::CausalLM<float>& model, const train::Task& task, const std::vector<SaeParams<float>>& t,
    const SaeConfig& config, const train::Batch& held_out, int top_tokens) {
  const int L = static_cast<int>(t.size());
  std::vector<std::vector<std::vector<FeatureHit>>> best(L);
  std::vector<std::vector<int64_t>> active(L);
  for (int l = 0; l < L; ++l)
    if (t[l].W_enc.defined()) {
      best[l].resize(t[l].d_sae());
      active[l].assign(t[l].d_sae(), 0);
    }
  // Every layer's features at the kept tokens of `chunk`, from one clean forward.
  auto features_on = [&](const train::Batch& chunk, const std::vector<int64_t>& kept) {
    nn::Hooks<float> hooks;
    for (int l = 0; l < L; ++l)
      if (t[l].W_enc.defined()) hooks.capture(transcoder_in_point(model, l));
    ag::NoGradScope no_grad;
    model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, &hooks);
    std::vector<ag::Tensor<float>> f(L);
    for (int l = 0; l < L; ++l)
      if (t[l].W_enc.defined() && !kept.empty())
        f[l] = features_of(t[l], config, gather(hooks.captured(transcoder_in_point(model, l)), kept));
    return f;
  };
  int64_t tokens = 0;
  for (int b0 = 0; b0 < held_out.B; b0 += kChunk) {
    const train::Batch chunk = slice(held_out, b0, std::min(held_out.B, b0 + kChunk));
    const std::vector<int64_t> kept = kept_tokens(chunk, config.skip_bos);
    tokens += static_cast<int64_t>(kept.size());
    const std::vector<ag::Tensor<float>> f = features_on(chunk, kept);
    for (int l = 0; l < L; ++l) {
      if (!f[l].defined()) continue;
      const int64_t M = t[l].d_sae();
      for (size_t r = 0; r < kept.size(); ++r)
        for (int64_t j = 0; j < M; ++j) {
          const float a = f[l].data()[static_cast<int64_t>(r) * M + j];
          if (!(a > 0)) continue;
          ++active[l][j];
          offer_example(best[l][j], {a, b0 + kept[r] / chunk.T, static_cast<int>(kept[r] % chunk.T)},
                        config.top_examples);
        }
    }
  }
  std::vector<std::vector<findings::SaeFeature>> out(L);
  for (int l = 0; l < L; ++l) {
    if (!t[l].W_enc.defined()) continue;
    const int64_t M = t[l].d_sae(), D = t[l].d_out();
    // The direction written to the residual stream: the decoder row, or a cross-layer feature's rows summed.
    SaeParams<float> direct = t[l];
    if (t[l].writes > 1) {
      direct.W_dec = ag::Tensor<float>::zeros({M, D});
      direct.writes = 1;
      for (int64_t j = 0; j < M; ++j)
        for (int64_t w = 0; w < t[l].writes; ++w)
          for (int64_t k = 0; k < D; ++k)
            direct.W_dec.data()[j * D + k] += t[l].W_dec.data()[(j * t[l].writes + w) * D + k];
    }
    const std::vector<float> effects = decoder_logit_effects(model, direct, out_point(l));
    const int64_t V = static_cast<int64_t>(effects.size()) / M;
    out[l].assign(static_cast<size_t>(M), {});
    for (int64_t j = 0; j < M; ++j) {
      findings::SaeFeature& f = out[l][j];
      f.index = j;
      f.density = tokens > 0 ? static_cast<double>(active[l][j]) / tokens : 0;
      fill_feature(f, effects.data() + j * V, V, top_tokens, best[l][j], task);
    }
  }
  // Each example's activation at every token of its sequence.
  for (int s = 0; s < held_out.B; ++s) {
    bool any = false;
    for (int l = 0; l < L && !any; ++l)
      for (const findings::SaeFeature& f : out[l])
        for (const findings::SaeExample& ex : f.examples) any = any || ex.sequence == s;
    if (!any) continue;
    const train::Batch one = slice(held_out, s, s + 1);
    const std::vector<int64_t> kept = kept_tokens(one, config.skip_bos);
    const std::vector<ag::Tensor<float>> f = features_on(one, kept);
    const std::vector<std::string> names = sequence_token_names(task, one);
    for (int l = 0; l < L; ++l) {
      if (!f[l].defined()) continue;
      const int64_t M = t[l].d_sae();
      for (int64_t j = 0; j < M; ++j)
        for (findings::SaeExample& ex : out[l][j].examples) {
          if (ex.sequence != s) continue;
          ex.tokens = names;
          ex.acts.assign(names.size(), 0.f);
          for (size_t r = 0; r < kept.size(); ++r)
            if (kept[r] < static_cast<int64_t>(names.size()))
              ex.acts[kept[r]] = f[l].data()[static_cast<int64_t>(r) * M + j];
        }
    }
  }
  return out;
}

namespace {

// Every trained layer's features.json and features.html under `out` (the page's table: the layer's
// evaluation and the CE with every MLP replaced), then the run's report when the folder is the run's.
void write_feature_pages(analysis::StudyRun& run, const std::string& out, bool in_run,
                         const std::vector<SaeParams<float>>& trained, const SaeConfig& config,
                         const train::Batch& held_out, const findings::TranscoderEval& eval,
                         std::vector<std::string>* wrote) {
  const std::vector<std::vector<findings::SaeFeature>> features =
      transcoder_features(*run.model, *run.task, trained, config, held_out);
  const nlohmann::json ej = findings::transcoder_eval_to_json(eval);
  for (size_t i = 0; i < eval.layers.size(); ++i) {
    const int l = eval.layers[i].layer;
    nlohmann::json page = ej["layers"][i];
    for (const char* key :
         {"cross_layer", "ce_clean", "ce_replaced", "ce_zero_ablation", "ce_loss_recovered"})
      page[key] = ej[key];
    const std::string dir = io::layout::transcoder_dir(out, l);
    const std::string title = run.config.name + ", step " + std::to_string(run.step) + ": " +
                              (eval.cross_layer ? "cross-layer transcoder" : "transcoder") + " at layer " +
                              std::to_string(l);
    io::write_text_file_atomically(io::layout::transcoder_features_json(dir),
                                   findings::sae_features_to_json(features[l]).dump() + "\n");
    io::write_text_file_atomically(io::layout::transcoder_features_html(dir),
                                   findings::sae_features_html(title, page, features[l]));
    wrote->push_back(io::layout::transcoder_features_json(dir));
    wrote->push_back(io::layout::transcoder_features_html(dir));
  }
  if (in_run) {
    analysis::write_run_report(run.dir, run.config.name);  // its "Transcoders" section links the pages
    wrote->push_back(io::layout::report_html(run.dir));
  }
}

// The end of both trainings (per-layer and cross-layer): the evaluation on the held-out set into
// `result` and DIR/eval.json, then the feature pages.
void evaluate_and_write_pages(analysis::StudyRun& run, const std::string& out, bool in_run,
                              const std::vector<SaeParams<float>>& trained, const SaeConfig& config,
                              analysis::Output<TranscoderOutcome>& result) {
  const train::Batch held_out = run.task->eval_set(run.config.seed, config.eval_sequences);
  result.result.eval = evaluate_transcoders(*run.model, trained, config, held_out);
  result.result.eval.steps = config.steps;
  io::write_text_file_atomically(io::layout::transcoders_eval_json(out),
                                 findings::transcoder_eval_to_json(result.result.eval).dump(1) + "\n");
  result.wrote.push_back(io::layout::transcoders_eval_json(out));
  write_feature_pages(run, out, in_run, trained, config, held_out, result.result.eval, &result.wrote);
}

// The config a checkpoint was trained with (its metadata "config").
SaeConfig checkpoint_config(const std::string& path) {
  const train::SafetensorsFile header = train::read_safetensors_header(path);
  return sae_config_from_json(
      io::parse_json(train::metadata_string(header, "config", path), path + " (config)"), path + " (config)");
}

// `transcoder` with cross_layer: one CltTrainer over every layer, checkpointed at DIR/checkpoint.safetensors,
// saved as DIR/L/transcoder.safetensors per layer, evaluated as the per-layer ones.
analysis::Output<TranscoderOutcome> cross_layer_transcoder(analysis::StudyRun& run,
                                                           const TranscoderRequest& request,
                                                           const SaeConfig& asked, const std::string& out) {
  const nn::CausalLM<float>& model = *run.model;
  const int L = static_cast<int>(model.shape.n_layers);
  const nn::ModelView<float> mv = nn::view(model);
  for (int l = 0; l < L; ++l)
    if (!mv.layers[l].has_mlp)
      throw analysis::RequestError("cross_layer: layer " + std::to_string(l) +
                                   " has no MLP (a cross-layer transcoder "
                                   "replaces every layer's)");
  const std::string checkpoint = io::layout::transcoders_clt_checkpoint(out);
  if (request.resume && !std::filesystem::exists(checkpoint))
    throw analysis::RequestError("resume: no checkpoint " + checkpoint);
  const SaeConfig config = request.resume ? checkpoint_config(checkpoint) : asked;
  std::vector<std::string> ins, outs;
  for (int l = 0; l < L; ++l) {
    ins.push_back(transcoder_in_point(model, l));
    outs.push_back(out_point(l));
  }
  ModelActivations source(model, *run.task, ins, outs, config);
  const int64_t D = source.d_in() / L;
  std::filesystem::create_directories(out);
  const bool normalize = !request.resume && config.normalize_activations != SaeNormalize::none;
  CltTrainer trainer(config, L, D, request.resume ? std::vector<float>{} : source.mean(),
                     normalize ? source.norm_scale() : 1.f, normalize ? source.norm_scale(true) : 1.f);
  if (request.resume) trainer.load_checkpoint(checkpoint);
  const std::map<std::string, std::string> metadata = {{"config", sae_config_to_json(config).dump()},
                                                       {"hook_name", ins[0]},
                                                       {"hook_name_out", outs[0]},
                                                       {"d_in", std::to_string(D)},
                                                       {"d_out", std::to_string(D)},
                                                       {"d_sae", std::to_string(config.features(D))},
                                                       {"run", run.dir}};
  analysis::Output<TranscoderOutcome> result;
  const bool finished = train_dictionary(
      trainer,
      [&](int64_t step) {
        return DictBatch{source.batch(step), source.target(step)};
      },
      "cross-layer transcoder", checkpoint, metadata, request.progress, request.stop);
  result.result.steps = trainer.steps_done();
  if (!finished) {
    result.result.stopped_layer = 0;
    result.wrote = {checkpoint};
    return result;
  }
  const std::vector<SaeParams<float>> trained = trainer.raw_params();
  for (int l = 0; l < L; ++l) {
    const std::string dir = io::layout::transcoder_dir(out, l);
    std::filesystem::create_directories(dir);
    std::map<std::string, std::string> meta = metadata;
    meta["hook_name"] = ins[l];
    meta["hook_name_out"] = outs[l];
    meta["layer"] = std::to_string(l);
    meta["n_layers"] = std::to_string(L);
    // A per-layer checkpoint left by an earlier per-layer training would resume the wrong kind.
    std::filesystem::remove(io::layout::transcoder_checkpoint(dir));
    write_sae_file(io::layout::transcoder_model(dir), trained[l], meta);
    result.wrote.push_back(io::layout::transcoder_model(dir));
  }
  result.wrote.push_back(checkpoint);
  evaluate_and_write_pages(run, out, request.out.empty(), trained, config, result);
  return result;
}

}  // namespace

analysis::Output<TranscoderOutcome> transcoder(analysis::StudyRun& run, const TranscoderRequest& request) {
  if (request.resume && !request.config.empty())
    throw analysis::RequestError("resume: continues with the checkpoints' own config; leave out config");
  if (request.cross_layer && !request.layers.empty())
    throw analysis::RequestError("layers: a cross-layer transcoder spans every layer; leave out layers");
  const nn::CausalLM<float>& model = *run.model;
  if (request.cross_layer) {
    if (model.shape.attention_only)
      throw analysis::RequestError("cross_layer: the model is attention-only: no MLP to replace");
    const SaeConfig asked = request.config.empty() ? SaeConfig{} : load_sae_config(request.config);
    const std::string out = request.out.empty() ? io::layout::transcoders_root(run.dir) : request.out;
    std::optional<io::RunLock> lock;
    if (request.out.empty()) {
      lock.emplace(run.dir);
      io::check_folder_below_run(run.dir, out);
    }
    if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
      throw analysis::RequestError("out " + out + ": exists and is not a folder");
    return cross_layer_transcoder(run, request, asked, out);
  }
  const std::vector<int> layers = parse_layers(model, request.layers);
  SaeConfig config = request.config.empty() ? SaeConfig{} : load_sae_config(request.config);
  const bool in_run = request.out.empty();
  const std::string out = in_run ? io::layout::transcoders_root(run.dir) : request.out;
  std::optional<io::RunLock> lock;
  if (in_run) {
    lock.emplace(run.dir);
    io::check_folder_below_run(run.dir, out);
  }
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out))
    throw analysis::RequestError("out " + out + ": exists and is not a folder");
  // On resume, the config of the first layer's checkpoint (every layer trains with one config).
  if (request.resume) {
    std::string found;
    for (int l : layers) {
      const std::string c = io::layout::transcoder_checkpoint(io::layout::transcoder_dir(out, l));
      if (std::filesystem::exists(c)) {
        found = c;
        break;
      }
    }
    if (found.empty())
      throw analysis::RequestError("resume: no checkpoint under " + out + " for the layers asked");
    const train::SafetensorsFile header = train::read_safetensors_header(found);
    config = sae_config_from_json(
        io::parse_json(train::metadata_string(header, "config", found), found + " (config)"),
        found + " (config)");
  }
  analysis::Output<TranscoderOutcome> result;
  std::vector<SaeParams<float>> trained(static_cast<size_t>(model.shape.n_layers));
  for (int l : layers) {
    const std::string in = transcoder_in_point(model, l), dir = io::layout::transcoder_dir(out, l);
    const std::string checkpoint = io::layout::transcoder_checkpoint(dir);
    ModelActivations source(model, *run.task, in, config, out_point(l));
    std::filesystem::create_directories(dir);
    const bool resume = request.resume && std::filesystem::exists(checkpoint);
    const bool normalize = !resume && config.normalize_activations != SaeNormalize::none;
    const DictShape shape{source.d_in(), source.d_out(), true, config.skip};
    SaeTrainer trainer(config, shape, resume ? std::vector<float>{} : source.mean(),
                       normalize ? source.norm_scale() : 1.f, normalize ? source.norm_scale(true) : 1.f);
    if (resume) trainer.load_checkpoint(checkpoint);
    std::map<std::string, std::string> metadata = {{"config", sae_config_to_json(config).dump()},
                                                   {"hook_name", in},
                                                   {"hook_name_out", out_point(l)},
                                                   {"d_in", std::to_string(shape.d_in)},
                                                   {"d_out", std::to_string(shape.d_out)},
                                                   {"d_sae", std::to_string(trainer.params().d_sae())},
                                                   {"run", run.dir}};
    const bool finished = train_dictionary(
        trainer,
        [&](int64_t step) {
          return DictBatch{source.batch(step), source.target(step)};
        },
        "transcoder " + std::to_string(l), checkpoint, metadata, request.progress, request.stop);
    result.result.steps = trainer.steps_done();
    if (!finished) {
      result.result.stopped_layer = l;
      result.wrote = {checkpoint};
      return result;
    }
    trained[l] = trainer.raw_params();
    write_sae_file(io::layout::transcoder_model(dir), trained[l], metadata);
    result.wrote.push_back(io::layout::transcoder_model(dir));
    result.wrote.push_back(checkpoint);
  }
  evaluate_and_write_pages(run, out, in_run, trained, config, result);
  return result;
}

}  // namespace dictionary
