// The run configuration's schema: one table per section of the document (config.h), each row a field
// (io/field_table.h), and what follows from the rows alone: to_json, ==, config_fields() for the docs and
// resume_settable_fields(). Loading and --set are config_load.cpp; the machine's limits machine_checks.cpp.
//
// How to add a config field:
//   1. Declare the member, with its type and default, in its section's struct (config.h; the model's in
//      nn/model_shape.h).
//   2. Add one row to the section's table below: the JSON key, the member, what it means (one line), the
//      values it accepts (a range or choice checked right after the section is read, or a rule() that
//      code after the tables' pass checks), kResumable if `train --resume RUN --set` may change it, and
//      what a special default stands for ("0 = the task's T").
//   3. Use its value; run test_train_test_config, which prints docs/configs.md's row for the new field.
// Reading (with its type and range errors), the unknown-key check, to_json, ==, resume_settable_fields()
// and docs/configs.md's field table follow from the row. Rules between fields (n_heads divides d_model,
// max_len covers the task, the memory estimate, the task's own checks) are code in config_load.cpp's
// validate().
#include "train/config_tables.h"

namespace train {

using io::above;
using io::at_least;
using io::kFixed;
using io::kResumable;
using io::not_empty;
using io::one_of;
using io::rule;
using io::Table;

const Table<Config>& root_fields() {
  static const Table<Config> fields = {
      {"name", &Config::name, "the run's name", not_empty()},
      {"seed", &Config::seed, "seeds parameter init and the training data stream", rule("0 .. 2^64-1")},
  };
  return fields;
}

// train/tasks.h checks these (find_task_problem), after the pass: the limits depend on the kind.
const Table<TaskConfig>& task_fields() {
  static const Table<TaskConfig> fields = {
      {"kind", &TaskConfig::kind, "the toy task to train on", rule("a kind of the Tasks table below")},
      {"vocab", &TaskConfig::vocab,
       "value tokens 0..vocab-1, special tokens not counted (the modulus p for modadd)",
       rule("2 .. 1000000, and the task's own rule below")},
      {"length", &TaskConfig::length, "n, the values in the prompt (operands for modadd); text: the window T",
       rule("1 .. 10000 (at least 2 for induction and modadd), and the task's own rule below")},
      {"path", &TaskConfig::path, "the data file of sequences (JSONL) and text (UTF-8); stored absolute",
       rule("a regular file, for sequences and text only")},
      {"vocab_file", &TaskConfig::vocab_file, "sequences: the vocabulary, one token a line, in id order",
       rule("a regular file, for sequences only"), kFixed, "the sorted tokens of the file"},
      {"unit", &TaskConfig::unit, "text: what a token is", one_of({"char", "byte", "bpe"})},
      {"tokenizer", &TaskConfig::tokenizer,
       "the tokenizer.json (or folder of vocab.json and merges.txt) of text with unit bpe (stored absolute) "
       "and of pretrained (relative to the run folder)",
       rule("a byte-level BPE tokenizer file, for text with unit bpe and pretrained only")},
      {"train_fraction", &TaskConfig::train_fraction,
       "the fraction of a finite dataset trained on, split by the seed; the rest is held out",
       at_least(0).below(1), kFixed,
       "the kind's own split: built-in kinds stream fresh sequences and hold one in five out; text holds "
       "its last 10% out"},
  };
  return fields;
}

// io::named for an option of the shape, a member of ModelConfig's base.
template <typename E>
io::Named<ModelConfig> model_named(E nn::ModelShape::*member, std::vector<std::pair<E, std::string>> names) {
  return io::named(static_cast<E ModelConfig::*>(member), std::move(names));
}

const Table<ModelConfig>& model_fields() {
  static const Table<ModelConfig> fields = {
      {"d_model", &ModelConfig::d_model, "width of the residual stream", at_least(1)},
      {"n_heads", &ModelConfig::n_heads, "attention heads per layer", at_least(1, "divides `d_model`")},
      {"n_kv_heads", &ModelConfig::n_kv_heads,
       "key and value heads per layer (grouped-query attention; 1: multi-query): query head h reads kv head "
       "h / (n_heads / n_kv_heads), and Wk and Wv are n_kv_heads * d_model / n_heads wide",
       at_least(0, "divides `n_heads`"), kFixed, "`n_heads`"},
      {"n_layers", &ModelConfig::n_layers, "transformer blocks", at_least(1)},
      {"d_ff", &ModelConfig::d_ff, "hidden width of each MLP (unused when `attention_only`)", at_least(1)},
      {"attention_only", &ModelConfig::attention_only, "blocks without LN2 and MLP"},
      {"norm",
       model_named(
           &ModelConfig::norm,
           {{nn::NormKind::layer, "layer"}, {nn::NormKind::rms, "rms"}, {nn::NormKind::none, "none"}}),
       "the norm before attention, the MLP and the unembedding (ln1, ln2, ln_f): LayerNorm, RMSNorm (a "
       "weight, "
       "no centring, no bias: Llama's), or none (each is the identity); `layer_norm` true or false, read as "
       "`layer` or `none`, is the older spelling"},
      {"norm_eps", &ModelConfig::norm_eps,
       "the eps each norm (layer or rms) adds to the mean square under its square root; 1e-5 is LayerNorm's "
       "and Llama 2's RMSNorm's (Llama 1 used 1e-6)",
       above(0)},
      {"positions",
       model_named(&ModelConfig::positions, {{nn::PositionKind::learned, "learned"},
                                             {nn::PositionKind::rotary, "rotary"},
                                             {nn::PositionKind::none, "none"}}),
       "how attention knows positions: a learned embedding `pos_emb` added to the tokens' (GPT-2's), rotary "
       "(RoPE, GPT-NeoX's rotate_half layout: each head's q and k turned by their position after the "
       "projection; no `pos_emb`), or none (NoPE: only the causal mask orders the tokens; no `pos_emb`)"},
      {"rotary_fraction", &ModelConfig::rotary_fraction,
       "rotary: the fraction of each head's dims that turn, the first `rotary_fraction * d_model / n_heads` "
       "(NeoX's partial rotary, Pythia's 0.25); the rest carry no position",
       [] {
         io::Valid valid = above(0).up_to(1);
         valid.note =
             "with `positions` rotary, `rotary_fraction * d_model / n_heads` rounded down is even and >= 2";
         return valid;
       }()},
      {"rotary_base", &ModelConfig::rotary_base,
       "rotary: the base of the angles, pair i of `rotary_dims` turning by `base^(-2i / rotary_dims)` per "
       "position (10000 is RoPE's and Llama 2's)",
       above(0)},
      {"attn_scale",
       model_named(&ModelConfig::attn_scale,
                   {{nn::AttnScale::sqrt_dk, "sqrt_dk"}, {nn::AttnScale::none, "none"}}),
       "what attention multiplies q k^T by before the softmax: 1 / sqrt(d_model / n_heads), or 1 (none: "
       "GPT-Neo's)"},
      {"qk_norm", &ModelConfig::qk_norm,
       "RMS-normalise each head's q and k over its d_model / n_heads values before the product, with a "
       "learned weight of that size shared by the heads (Qwen3's: after the projection, before rotary "
       "positions); eps `norm_eps`"},
      {"attn_window", &ModelConfig::attn_window,
       "local attention: query t sees keys in (t - window, t]; one number (read as a list of one) for every "
       "layer, or one per layer (GPT-Neo's alternating local and global layers); 0 or [] = global",
       at_least(0, "one value, or `n_layers` values")},
      {"activation",
       model_named(&ModelConfig::activation, {{nn::Activation::gelu, "gelu"},
                                              {nn::Activation::relu, "relu"},
                                              {nn::Activation::relu2, "relu2"},
                                              {nn::Activation::swiglu, "swiglu"},
                                              {nn::Activation::geglu, "geglu"},
                                              {nn::Activation::gelu_erf, "gelu_erf"}}),
       "the MLP's nonlinearity (GELU is the tanh approximation, gelu_erf the exact one: Pythia's and "
       "nanoGPT's); relu2 is ReLU squared; swiglu and geglu are "
       "gated MLPs, fc2(act(gate(x)) * fc1(x)) with act silu (Llama's SwiGLU) or GELU, a third Linear "
       "`gate`"},
      {"bias", &ModelConfig::bias, "biases in the attention (Wq, Wk, Wv, Wo), MLP and unembedding linears"},
      {"qkv_bias", &ModelConfig::qkv_bias,
       "biases on Wq, Wk and Wv even when `bias` is false (Qwen2's: no other linear has one)"},
      {"max_len", &ModelConfig::max_len,
       "the longest sequence the model reads (rows of the position embedding with learned positions)",
       rule("0, or >= the task's T"), kFixed, "the task's T"},
      {"vocab", &ModelConfig::vocab, "rows of the token embedding and the logits",
       rule("0, or >= the task's vocabulary (values + special tokens)"), kFixed, "the task's vocabulary"},
      // The block's wiring, the unembedding and the logits (issue 41).
      {"parallel", &ModelConfig::parallel,
       "attention and the MLP both read the block's input, h + attn(ln1(h)) + mlp(ln2(h)), with two norms "
       "(GPT-NeoX's and Pythia's parallel residual); false: the MLP reads h + attn(ln1(h))"},
      {"tie_embeddings", &ModelConfig::tie_embeddings,
       "the unembedding is the token embedding's weight (lm_head.weight is tok_emb.weight: one parameter, "
       "its gradient the sum of both uses; lm_head keeps its own bias)"},
      {"logit_softcap", &ModelConfig::logit_softcap,
       "c > 0 caps the logits smoothly, c * tanh(logits / c) (Gemma 2, modded-nanogpt); 0 = off",
       at_least(0)},
      {"init_from", &ModelConfig::init_from,
       "a run folder (`attograd import`'s, or any run's) whose checkpoint the training starts from instead "
       "of the random init (at step 0 only; the optimizer starts fresh); stored absolute",
       rule("a run folder whose config.json model section equals this one (docs/import.md \"Fine-tuning\")"),
       kFixed, "the random init"},
  };
  return fields;
}

const Table<TrainConfig>& train_fields() {
  static const Table<TrainConfig> fields = {
      {"steps", &TrainConfig::steps, "optimizer steps of the whole run", at_least(1), kResumable},
      {"batch_size", &TrainConfig::batch_size,
       "sequences per step; 0 = the whole training set of a finite dataset every step, and every held-out "
       "sequence in each evaluation",
       at_least(0, "0 only for a finite dataset")},
      {"lr", &TrainConfig::lr, "peak learning rate of AdamW", above(0)},
      {"warmup", &TrainConfig::warmup, "steps of linear warmup", at_least(0)},
      {"schedule", &TrainConfig::schedule, "the learning rate after warmup", one_of({"cosine", "constant"})},
      {"weight_decay", &TrainConfig::weight_decay,
       "AdamW's decoupled weight decay, on the parameters `train.decay` names", at_least(0)},
      {"decay", &TrainConfig::decay,
       "the parameters weight decay applies to: \"weights\" the Linear weights only (GPT-2's rule: no "
       "biases, LayerNorm or embeddings), \"all\" every parameter (torch.optim.AdamW's)",
       one_of({"weights", "all"})},
      {"betas", &TrainConfig::betas, "AdamW's moment decay rates [beta1, beta2]", at_least(0).below(1)},
      {"optimizer", &TrainConfig::optimizer,
       "\"adamw\" every parameter; \"muon\" the hidden 2-D weight matrices (attention's and the MLP's) "
       "by Muon (Nesterov momentum 0.95, orthogonalised by five Newton-Schulz iterations, scaled by "
       "sqrt(max(1, rows / cols))) and the rest (embeddings, norms, biases, the unembedding) by AdamW",
       one_of({"adamw", "muon"})},
      {"muon_lr", &TrainConfig::muon_lr,
       "Muon's peak learning rate (optimizer \"muon\"), on the schedule of `train.lr`: warmup and decay "
       "scale both alike",
       above(0)},
      {"scored_rows_only", &TrainConfig::scored_rows_only,
       "run the last block's MLP and the unembedding on the scored positions only (and its queries, when "
       "every sequence scores the same positions), and the first block's projections once per (token, "
       "position) when the batch outnumbers the vocabulary: the same loss and gradients up to float "
       "rounding (sums in another order), faster when few positions are scored"},
      {"grad_clip", &TrainConfig::grad_clip, "global gradient norm limit; 0 = no clipping", at_least(0)},
      {"threads", &TrainConfig::threads, "worker threads (results are the same bits for any count)",
       at_least(1, "<= 4 x the machine's cores"), kResumable},
      {"eval_every", &TrainConfig::eval_every, "steps between held-out evaluations", at_least(1), kResumable},
      {"log_every", &TrainConfig::log_every, "steps between lines of `metrics.jsonl`", at_least(1),
       kResumable},
      {"eval_size", &TrainConfig::eval_size, "held-out sequences per evaluation", at_least(1)},
      {"memory_limit_gb", &TrainConfig::memory_limit_gb,
       "configs whose memory estimate is above it are refused", at_least(0), kResumable,
       "the machine's memory"},
      {"shards", &TrainConfig::shards,
       "the batch's rows are split into this many shards, run forward and backward at once, one per thread "
       "(\"Shards and threads\" above)",
       at_least(0, "<= `train.batch_size`"), kFixed,
       "2 for models up to 4M parameters (and batches of 2 or more rows), else 1"},
  };
  return fields;
}

const Table<OutputConfig>& output_fields() {
  static const Table<OutputConfig> fields = {
      {"dir", &OutputConfig::dir, "the run folder", not_empty(), kFixed, "\"runs/\" + `name`"},
      {"attention_every", &OutputConfig::attention_every,
       "steps between attention maps; 0 = none during training", at_least(0), kResumable},
      {"probes", &OutputConfig::probes, "fixed probe inputs whose attention maps are saved", at_least(0)},
      {"measures_every", &OutputConfig::measures_every,
       "steps between the progress measures of a modular-addition run (`measures.jsonl`, docs/grokking.md); "
       "0 = "
       "none",
       at_least(0, "0 unless the task is modadd or modadd_bare with length 2 and an odd vocab, with an MLP"),
       kResumable},
      {"checkpoint_every", &OutputConfig::checkpoint_every, "steps between checkpoints; 0 = only at the end",
       at_least(0), kResumable},
  };
  return fields;
}

const std::vector<std::string>& resume_settable_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> paths;
    for (const FieldInfo& field : config_fields())
      if (field.resume_settable) paths.push_back(field.path);
    return paths;
  }();
  return fields;
}

nlohmann::json to_json(const Config& config) {
  nlohmann::json document = io::fields_to_json(root_fields(), config);
  for_each_section([&](const char* key, auto section, const auto& fields) {
    document[key] = io::fields_to_json(fields, config.*section);
  });
  return document;
}

const std::vector<FieldInfo>& config_fields() {
  static const std::vector<FieldInfo> fields = [] {
    std::vector<FieldInfo> infos;
    io::add_field_infos(infos, "", root_fields());
    for_each_section(
        [&](const char* key, auto, const auto& table) { io::add_field_infos(infos, key, table); });
    return infos;
  }();
  return fields;
}

bool operator==(const TaskConfig& a, const TaskConfig& b) {
  return io::fields_equal(task_fields(), a, b);
}

bool operator==(const ModelConfig& a, const ModelConfig& b) {
  return io::fields_equal(model_fields(), a, b);
}

bool operator==(const TrainConfig& a, const TrainConfig& b) {
  return io::fields_equal(train_fields(), a, b);
}

bool operator==(const OutputConfig& a, const OutputConfig& b) {
  return io::fields_equal(output_fields(), a, b);
}

bool operator==(const Config& a, const Config& b) {
  bool equal = io::fields_equal(root_fields(), a, b);
  for_each_section([&](const char*, auto section, const auto& fields) {
    equal = equal && io::fields_equal(fields, a.*section, b.*section);
  });
  return equal;
}

}  // namespace train
