#include "study/transcoder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"
#include "io/run_ownership.h"
#include "nn/hooks.h"
#include "study/sae_eval.h"
#include "study/sae_source.h"
#include "study/sae_tool.h"
#include "train/safetensors.h"

namespace study {

namespace {

// Sequences per forward in the evaluation.
constexpr int kChunk = 32;

std::string out_point(int layer) {
  return "blocks." + std::to_string(layer) + ".mlp.out";
}

// The layers of "0,1" (each once, in the order given), checked against the model: every one has an MLP.
std::vector<int> parse_layers(const nn::CausalLM<float>& model, const std::string& text) {
  const int n = static_cast<int>(model.blocks.size());
  std::vector<int> layers;
  if (text.empty()) {
    for (int l = 0; l < n; ++l)
      if (model.blocks[l]->mlp) layers.push_back(l);
    if (layers.empty()) throw RequestError("layers: the model is attention-only: no MLP to replace");
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
      throw RequestError("layers: '" + word + "' is not a layer of this model (0.." + std::to_string(n - 1) +
                         ")");
    if (!model.blocks[l]->mlp) throw RequestError("layers: layer " + word + " has no MLP");
    if (std::find(layers.begin(), layers.end(), l) != layers.end())
      throw RequestError("layers: layer " + word + " is given twice");
    layers.push_back(l);
  }
  if (layers.empty()) throw RequestError("layers: expected layers such as 0,1");
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

SaeOutput<float> run_transcoder(const SaeParams<float>& p, const SaeConfig& c, const ag::Tensor<float>& x) {
  ag::NoGradScope no_grad;
  return sae_forward(p, x, c.activation, 0.f, c.k);
}

}  // namespace

std::string transcoder_in_point(const nn::CausalLM<float>& model, int layer) {
  return "blocks." + std::to_string(layer) + (nn::has_norm(model.shape.norm) ? ".ln2.out" : ".resid_mid");
}

std::vector<SaeParams<float>> load_transcoders(const nn::CausalLM<float>& model, const std::string& folder) {
  std::vector<SaeParams<float>> out(model.blocks.size());
  const int64_t D = model.shape.d_model;
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    if (!model.blocks[l]->mlp) continue;
    const std::string path =
        io::layout::transcoder_model(io::layout::transcoder_dir(folder, static_cast<int>(l)));
    if (!std::filesystem::exists(path))
      throw RequestError("transcoders: " + path + ": missing (train it with attograd transcoder)");
    out[l] = load_sae(path);
    if (!out[l].transcoder || out[l].d_in() != D || out[l].d_out() != D)
      throw RequestError("transcoders: " + path + ": expected a transcoder reading and writing d_model " +
                         std::to_string(D));
  }
  return out;
}

findings::TranscoderEval evaluate_transcoders(const nn::CausalLM<float>& model,
                                              const std::vector<SaeParams<float>>& transcoders,
                                              const SaeConfig& config, const train::Batch& held_out) {
  findings::TranscoderEval e;
  const int L = static_cast<int>(model.blocks.size());
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
    for (int l = 0; l < L && n > 0; ++l) {
      const SaeParams<float>& p = transcoders[l];
      if (!p.W_enc.defined()) continue;
      const ag::Tensor<float> x = gather(clean_hooks.captured(transcoder_in_point(model, l)), kept);
      const ag::Tensor<float> y = gather(clean_hooks.captured(out_point(l)), kept);
      const SaeOutput<float> o = run_transcoder(p, config, x);
      Stats& s = stats[l];
      const int64_t D = p.d_out(), M = p.d_sae();
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t k = 0; k < D; ++k) {
          const double yv = y.data()[r * D + k], d = o.x_hat.data()[r * D + k] - yv;
          s.sq_err += d * d;
          s.sum_y[k] += yv;
          s.sq_y += yv * yv;
        }
        for (int64_t j = 0; j < M; ++j) {
          const int64_t on = o.f.data()[r * M + j] > 0;
          s.active[j] += on;
          s.l0 += static_cast<double>(on);
        }
      }
    }
    // Every MLP replaced at once (mode 0), or zeroed (mode 1), at the kept tokens.
    ag::Tensor<float> replaced[2];
    for (int mode = 0; mode < 2; ++mode) {
      nn::Hooks<float> hooks;
      std::vector<ag::Tensor<float>> inputs(L);
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
          const SaeOutput<float> o = run_transcoder(transcoders[l], config, gather(inputs[l], kept));
          for (int64_t r = 0; r < n; ++r)
            std::copy(o.x_hat.data() + r * D, o.x_hat.data() + (r + 1) * D, w.data() + kept[r] * D);
          return w;
        });
      }
      replaced[mode] = model.forward(chunk.inputs, chunk.B, chunk.T, chunk.is_padding, &hooks);
    }
    loss.add(chunk.targets, clean, replaced[0], replaced[1]);
  }
  if (e.tokens == 0)
    throw RequestError("the held-out sequences have no token to evaluate the transcoders on");
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
  const SplicedLoss::Means m = loss.means();
  e.ce_clean = m.clean;
  e.ce_replaced = m.spliced;
  e.ce_zero_ablation = m.zeroed;
  e.kl = m.kl;
  e.ce_loss_recovered = m.recovered;
  return e;
}

Output<TranscoderOutcome> transcoder(StudyRun& run, const TranscoderRequest& request) {
  if (request.resume && !request.config.empty())
    throw RequestError("resume: continues with the checkpoints' own config; leave out config");
  const nn::CausalLM<float>& model = *run.model;
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
    throw RequestError("out " + out + ": exists and is not a folder");
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
    if (found.empty()) throw RequestError("resume: no checkpoint under " + out + " for the layers asked");
    const train::SafetensorsFile header = train::read_safetensors_header(found);
    config = sae_config_from_json(
        io::parse_json(train::metadata_string(header, "config", found), found + " (config)"),
        found + " (config)");
  }
  Output<TranscoderOutcome> result;
  std::vector<SaeParams<float>> trained(model.blocks.size());
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
  const train::Batch held_out = run.task->eval_set(run.config.seed, config.eval_sequences);
  result.result.eval = evaluate_transcoders(model, trained, config, held_out);
  result.result.eval.steps = config.steps;
  io::write_text_file_atomically(io::layout::transcoders_eval_json(out),
                                 findings::transcoder_eval_to_json(result.result.eval).dump(1) + "\n");
  result.wrote.push_back(io::layout::transcoders_eval_json(out));
  return result;
}

}  // namespace study
