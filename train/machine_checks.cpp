// The checks of a config against the machine that will train it: the memory estimate, the thread limit,
// the default shard count, and the parameter count they rest on.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>

#include "train/config_tables.h"
#include "train/tasks.h"

namespace train {
namespace {

using io::field_fail;

// The bytes of this machine's memory (a large default when the system does not say).
double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size) : 64e9;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes < 1e13 ? "%.1f GB" : "%.3g GB", bytes / 1e9);
  return text;
}

}  // namespace

// What train.shards = 0 resolves to (config.h, kAutoShards).
int default_shards(const Config& config) {
  return config.train.batch_size >= kAutoShards && parameter_count(config.model) <= kAutoShardsMaxParameters
             ? kAutoShards
             : 1;
}

// Refuses a config whose memory estimate is over train.memory_limit_gb, naming the field that contributes
// most: the one whose reset to its default (or the task's size) would shrink the estimate the most.
void check_memory(const Config& config, int seq_len) {
  const double limit =
      config.train.memory_limit_gb > 0 ? config.train.memory_limit_gb * 1e9 : physical_memory_bytes();
  const double needed = estimate_memory_bytes(config, seq_len);
  if (needed <= limit) return;
  const Config defaults;
  // A task read from the run folder cannot be built here: its vocabulary is the model's.
  const int task_vocab = task_needs_run_folder(config.task)
                             ? static_cast<int>(config.model.vocab)
                             : make_task(config.task, config.seed)->vocab_size();
  struct Candidate {
    const char* pointer;
    int64_t value;
    std::function<void(Config&, int&)> reset;
  };
  const std::vector<Candidate> candidates = {
      {"/model/vocab", config.model.vocab, [&](Config& c, int&) { c.model.vocab = task_vocab; }},
      {"/model/d_model", config.model.d_model,
       [&](Config& c, int&) { c.model.d_model = std::min(c.model.d_model, defaults.model.d_model); }},
      {"/model/max_len", config.model.max_len, [&](Config& c, int& t) { c.model.max_len = t; }},
      {"/model/d_ff", config.model.d_ff,
       [&](Config& c, int&) { c.model.d_ff = std::min(c.model.d_ff, defaults.model.d_ff); }},
      {"/model/n_layers", config.model.n_layers,
       [&](Config& c, int&) { c.model.n_layers = std::min(c.model.n_layers, defaults.model.n_layers); }},
      {"/model/n_heads", config.model.n_heads,
       [&](Config& c, int&) { c.model.n_heads = std::min(c.model.n_heads, defaults.model.n_heads); }},
      {"/train/batch_size", config.train.batch_size,
       [&](Config& c, int&) {
         c.train.batch_size = std::min(c.train.batch_size, defaults.train.batch_size);
       }},
      {"/train/shards", config.train.shards,
       [&](Config& c, int&) { c.train.shards = std::min(c.train.shards, default_shards(c)); }},
      {"/train/eval_size", config.train.eval_size,
       [&](Config& c, int&) { c.train.eval_size = std::min(c.train.eval_size, defaults.train.eval_size); }},
      {"/task/length", config.task.length,
       [&](Config&, int& t) { t = std::min(t, 2 * defaults.task.length + 1); }},
  };
  const Candidate* blamed = &candidates.front();
  double best = -1;
  for (const Candidate& candidate : candidates) {
    Config smaller = config;
    int t = seq_len;
    candidate.reset(smaller, t);
    const double saved = needed - estimate_memory_bytes(smaller, t);
    if (saved > best) {
      best = saved;
      blamed = &candidate;
    }
  }
  const std::string over = "about " + gigabytes(needed) + " of memory (an estimate), over the limit of " +
                           gigabytes(limit) +
                           (config.train.memory_limit_gb > 0
                                ? " (train.memory_limit_gb)"
                                : " (this machine's memory; raise it with --set train.memory_limit_gb=N)");
  // Every size at its default or below: the limit itself is what is too small.
  if (best <= 0) field_fail("/train/memory_limit_gb", "the run needs " + over);
  field_fail(blamed->pointer, std::to_string(blamed->value) + " makes the run need " + over);
}

// `for_this_machine`: also check the limits of the machine that will train (train.threads); a checkpoint's

double parameter_count(const ModelConfig& m) {
  const double D = m.d_model, F = m.d_ff, V = m.vocab;
  // A norm's weight and its bias, where it has them.
  const double ln = D * ((nn::has_norm(m.norm) ? 1 : 0) + (nn::norm_has_bias(m.norm) ? 1 : 0));
  const double b = m.bias ? 1 : 0;
  const double dk = m.n_heads > 0 ? D / m.n_heads : 0;
  const double qk_norm = m.qk_norm ? 2 * dk : 0;                // q_norm and k_norm weights
  const double kv = static_cast<double>(nn::kv_heads(m)) * dk;  // wk's and wv's outputs
  const double qkv_b = m.bias || m.qkv_bias ? 1 : 0;            // wq's, wk's and wv's biases
  const double attention = ln + 2 * D * D + qkv_b * D + b * D + 2 * (D * kv + qkv_b * kv) + qk_norm;
  const double gates = nn::mlp_gated(m.activation) ? 2 : 1;  // fc1, and the gate of a gated MLP
  const double mlp =
      m.attention_only ? 0 : ln + gates * (D * F + b * F) + F * D + b * D;  // ln2, fc1, gate, fc2
  const double unembedding = m.tie_embeddings ? 0 : D * V;                  // tied: tok_emb's weight
  const double positions = nn::has_pos_emb(m.positions) ? static_cast<double>(m.max_len) * D : 0;
  return V * D + positions + m.n_layers * (attention + mlp) + ln + unembedding + b * V;
}

double estimate_memory_bytes(const Config& config, int seq_len) {
  const ModelConfig& m = config.model;
  const double D = m.d_model, F = m.attention_only ? 0 : m.d_ff, V = m.vocab, H = m.n_heads, T = seq_len;
  // Weights, gradients and AdamW's m and v, all float; each shard after the first, a copy of the weights
  // and its own gradients.
  const double parameters = (16 + 8 * std::max(0, config.train.shards - 1)) * parameter_count(m);
  // Per token and layer, the values autograd keeps (LayerNorm outputs, q k v, context, projections,
  // residual sums, the MLP's two hidden layers, H rows of scores and weights), each with its gradient;
  // then the logits and their softmax.
  const double per_token = m.n_layers * (11 * D + 2 * F + 2 * H * T) + 2 * V + 3 * D;
  const double activations = 8.0 * config.train.batch_size * T * per_token;
  const double held_out = 8.0 * config.train.eval_size * (T + 1);
  return parameters + activations + held_out;
}

int max_threads() {
  return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace train
