// The seed lesson ("self-attention from scratch") as text, every number computed by the engine: stable
// softmax, self-attention on "The cat sat on the mat" with its weight table and heatmap, the causal mask
// (exercise 1), two heads with Wo (exercise 2), two sentences through one instance (exercise 3), why
// attention divides by sqrt(dk), and the database-lookup analogy. Lines fit 80 columns; the whole lesson
// takes a few milliseconds.
#include "analysis/lesson.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/timing.h"
#include "findings/ascii_heatmap.h"
#include "findings/attention_maps.h"
#include "nn/attention.h"

namespace analysis {
namespace {

// The lesson's sizes: d_model 8, one head of dk = dv = 4, seed 42.
constexpr int64_t kDModel = 8, kDk = 4, kDv = 4;
constexpr uint64_t kSeed = 42;
const char* const kSentenceA = "The cat sat on the mat";
const char* const kSentenceB = "A dog ran in the park";

using Tensor = ag::Tensor<float>;

// The lesson's text so far: every section appends to it through say(), printf's format.
thread_local std::string* lesson_text = nullptr;

__attribute__((format(printf, 1, 2))) void say(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (n > 0) {
    const size_t old = lesson_text->size();
    lesson_text->resize(old + static_cast<size_t>(n) + 1);
    std::vsnprintf(&(*lesson_text)[old], static_cast<size_t>(n) + 1, format, again);
    lesson_text->resize(old + static_cast<size_t>(n));
  }
  va_end(again);
}

std::vector<std::string> words_of(const std::string& sentence) {
  std::istringstream in(sentence);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// FNV-1a: a fixed, portable hash, so a word's embedding never depends on the standard library.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The embedding table, one row per word: d_model numbers from N(0, 1), drawn by an ag::Rng seeded with
// the demo's seed and the word. The same word gets the same vector in every sentence (case-sensitive, so
// "The" and "the" differ); there are no positional embeddings, as in the lesson.
Tensor embed(const std::vector<std::string>& tokens) {
  std::vector<float> x;
  for (const std::string& w : tokens) {
    ag::Rng rng(kSeed ^ fnv1a(w));
    for (int64_t d = 0; d < kDModel; ++d) x.push_back(static_cast<float>(rng.normal()));
  }
  return Tensor::from({static_cast<int64_t>(tokens.size()), kDModel}, std::move(x));
}

// The lesson's module, initialised from ag::Rng(42): Wq, Wk (8 x 4) and Wv (8 x 4), Xavier-normal.
// (Returned as a prvalue: C++17 constructs it in place, the module is never copied.)
nn::SelfAttention<float> lesson_attention() {
  ag::Rng rng(kSeed);
  return nn::SelfAttention<float>(kDModel, kDk, kDv, rng);
}

// The T x T block at `offset` of a weights tensor, as the renderers take it.
findings::AttentionWeights to_map(const Tensor& w, int64_t offset, int64_t t) {
  findings::AttentionWeights m(static_cast<size_t>(t), std::vector<float>(static_cast<size_t>(t)));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) m[i][j] = w.data()[offset + i * t + j];
  return m;
}

// Self-attention weights of a sentence (no gradient needed to look at them).
findings::AttentionWeights attend(const nn::SelfAttention<float>& sa, const std::vector<std::string>& tokens,
                                  const Tensor& mask = {}) {
  ag::NoGradScope no_grad;
  const Tensor w = sa.forward(embed(tokens), mask).weights;
  return to_map(w, 0, static_cast<int64_t>(tokens.size()));
}

std::string number(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// "[0.659, 0.242, 0.099]"
std::string vector_str(const std::vector<float>& v, int decimals) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i], decimals);
  return s + "]";
}

std::string join(const std::vector<std::string>& words, const char* sep = " ") {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) s += (i ? sep : "") + words[i];
  return s;
}

void heading(int n, const char* title) {
  say("\n== %d. %s ==\n", n, title);
}

// ---- 1 ----
void softmax_section() {
  heading(1, "Softmax, numerically stable");
  say("softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x): subtracting the\n");
  say("max cancels out mathematically, but keeps every exp() <= 1 so none overflows.\n\n");
  ag::NoGradScope no_grad;
  const Tensor small = Tensor::from({3}, {2.0f, 1.0f, 0.1f});
  const Tensor p = ag::softmax(small);
  say("logits  %s\n", vector_str(small.to_vector(), 1).c_str());
  say("softmax %s   sum %s\n", vector_str(p.to_vector(), 3).c_str(), number(ag::sum(p).item(), 3).c_str());

  const Tensor large = Tensor::from({3}, {1000.0f, 1001.0f, 1002.0f});
  const Tensor e = ag::exp(large);
  const Tensor naive = ag::div(e, ag::sum(e, -1, true));
  const float top = *std::max_element(large.values().begin(), large.values().end());
  const Tensor shifted = ag::add_scalar(large, -top);
  say("\nlogits  %s\n", vector_str(large.to_vector(), 0).c_str());
  say("  naive  exp(x) / sum exp(x):    %s   (exp(1000) = %s in float)\n",
      vector_str(naive.to_vector(), 3).c_str(), number(e.data()[0], 0).c_str());
  say("  stable, x - max x = %s:  %s\n", vector_str(shifted.to_vector(), 0).c_str(),
      vector_str(ag::softmax(large).to_vector(), 3).c_str());
}

// ---- 2 ----
void self_attention_section() {
  heading(2, "Self-attention on six tokens");
  const std::vector<std::string> tokens = words_of(kSentenceA);
  say("Tokens: %s. Each word gets 8 random numbers from N(0, 1)\n", join(tokens).c_str());
  say("(an ag::Rng seeded with 42 and the word). nn::SelfAttention(d_model 8, dk 4,\n");
  say("dv 4): Wq, Wk, Wv Xavier-normal from ag::Rng(42).\n");
  say("Q = X Wq, K = X Wk, V = X Wv; weights = softmax(QK^T / sqrt(4)); out = weights V\n\n");
  const auto sa = lesson_attention();
  nn::AttentionResult<float> r;
  {
    ag::NoGradScope no_grad;
    r = sa.forward(embed(tokens));
  }
  const findings::AttentionWeights w = to_map(r.weights, 0, static_cast<int64_t>(tokens.size()));
  say("Attention weights (each row: where that token looks; rows sum to 1):\n");
  say("%s\n", findings::weight_table(w, tokens, tokens, 3).c_str());
  say("%s", findings::ascii_heatmap(w, tokens, tokens).c_str());
  say("\nOutput %s: each token's new vector is a blend of all six values.\n",
      ag::shape_str(r.output.shape()).c_str());
}

// ---- 3 ----
void causal_section() {
  heading(3, "Causal mask (exercise 1)");
  say("A mask sets scores to -inf before softmax, so exp() makes those weights 0.\n");
  say("Causal (decoder) masking, nn::causal_mask: token i sees tokens 0..i only.\n\n");
  const std::vector<std::string> tokens = words_of(kSentenceA);
  const auto sa = lesson_attention();
  const auto t = static_cast<int64_t>(tokens.size());
  const findings::AttentionWeights w = attend(sa, tokens, nn::causal_mask<float>(t));
  say("%s\n", findings::weight_table(w, tokens, tokens, 3).c_str());
  findings::AsciiOptions opts;
  opts.mark_future = true;
  say("%s", findings::ascii_heatmap(w, tokens, tokens, opts).c_str());
  say("\n\"%s\" can only look at itself (%s); \"%s\" chooses among all six.\n", tokens[0].c_str(),
      number(w[0][0], 3).c_str(), tokens.back().c_str());
}

// ---- 4 ----
void multi_head_section() {
  heading(4, "Two heads and Wo (exercise 2)");
  say("nn::MultiHeadAttention(d_model 8, 2 heads), init from ag::Rng(42): Wq, Wk, Wv\n");
  say("project to 8, split into 2 heads of dk = 4 that attend separately; the heads\n");
  say("are concatenated back to 8 and mixed by Wo.\n");
  const std::vector<std::string> tokens = words_of(kSentenceA);
  const auto t = static_cast<int64_t>(tokens.size());
  ag::Rng rng(kSeed);
  nn::MultiHeadAttention<float> mha(kDModel, 2, rng);
  const Tensor x = ag::reshape(embed(tokens), {1, t, kDModel});
  nn::Hooks<float> hooks;  // the per-head weights, read at the hook point blocks.0.attn.pattern
  const std::string pattern_point = nn::hook_name(nn::Point::attn_pattern, 0);
  hooks.capture(pattern_point);
  Tensor out;
  {
    ag::NoGradScope no_grad;
    out = mha.forward(x, {}, nn::HookSite<float>(&hooks, nn::block_prefix(0)));
  }
  const Tensor& weights = hooks.captured(pattern_point);  // (1, H, T, T)
  findings::Probe probe;
  probe.tokens = tokens;
  for (int h = 0; h < mha.n_heads; ++h) {
    probe.maps.push_back({0, h, to_map(weights, h * t * t, t)});
    say("\nHead %d:\n%s", h, findings::weight_table(probe.maps.back().weights, tokens, tokens, 3).c_str());
  }
  say("\n%s", findings::ascii_grid(probe).c_str());
  say("\nInput %s -> per-head weights %s -> output %s.\n", ag::shape_str(x.shape()).c_str(),
      ag::shape_str(weights.shape()).c_str(), ag::shape_str(out.shape()).c_str());
  say("PyTorch's nn.MultiheadAttention reports the mean of the heads' tables.\n");
}

// ---- 5 ----
void two_sentences_section() {
  heading(5, "Two sentences, one instance (exercise 3)");
  const std::vector<std::string> a = words_of(kSentenceA), b = words_of(kSentenceB);
  say("A: %s    B: %s\n", join(a).c_str(), join(b).c_str());
  say("Both go through the same SelfAttention instance. A's map is the one of\n");
  say("section 2; B's:\n\n");
  const auto sa = lesson_attention();
  const findings::AttentionWeights wa = attend(sa, a), wb = attend(sa, b);
  say("%s\n", findings::ascii_heatmap(wb, b, b).c_str());

  std::vector<std::string> rows, cols;
  for (size_t i = 0; i < a.size(); ++i) {
    rows.push_back(a[i] == b[i] ? a[i] : a[i] + "/" + b[i]);
    cols.push_back(std::to_string(i));
  }
  say("A - B (rows: A/B token; columns: key positions 0..5):\n");
  say("%s", findings::ascii_difference(wa, wb, rows, cols).c_str());

  // How far each row moved: total variation, half the L1 distance (0 = same row, 1 = disjoint).
  std::vector<float> moved(a.size(), 0.0f);
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a.size(); ++j) moved[i] += std::fabs(wa[i][j] - wb[i][j]) / 2;
  std::vector<size_t> order(a.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return moved[x] > moved[y]; });
  std::string most;
  for (size_t k = 0; k < 3 && k < order.size(); ++k)
    most += (k ? ", " : "") + rows[order[k]] + " " + number(moved[order[k]], 2);
  say("\nRows that changed most (total variation, 0 = same, 1 = disjoint):\n  %s\n", most.c_str());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] == b[i])
      say("\"%s\" is the same word with the same query in both, yet its row moved by %s:\n"
          "a weight is relative to every other key in the sentence.\n",
          a[i].c_str(), number(moved[i], 2).c_str());
  say("What stays: the weights Wq, Wk, Wv (one shared instance) and the formula.\n");
  say("What changes: the pattern, because queries and keys come from the content.\n");
}

// ---- 6 ----
struct SoftmaxStats {
  double spread;     // standard deviation of the scores softmax sees
  double top;        // the median over rows of a row's largest weight
  double saturated;  // the share of rows whose largest weight exceeds 0.99
  double gradient;   // the median over rows of the norm of a row's Jacobian d softmax(s) / d s
};

// Softmax over each row of `scores` (rows, n) and the size of its gradient, measured by the engine. The
// Jacobian of softmax is symmetric, so seeding every row with the one-hot vector e_i and running backward
// gives row i of each row's Jacobian: n backward passes give them all.
SoftmaxStats softmax_stats(const Tensor& scores) {
  const int64_t rows = scores.size(0), n = scores.size(1);
  Tensor s = scores.detach().set_requires_grad();
  const Tensor p = ag::softmax(s).detach();
  std::vector<double> sq(static_cast<size_t>(rows), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    s.zero_grad();
    std::vector<float> seed(static_cast<size_t>(rows * n), 0.0f);
    for (int64_t r = 0; r < rows; ++r) seed[static_cast<size_t>(r * n + i)] = 1.0f;
    ag::softmax(s).backward(seed);
    for (int64_t k = 0; k < rows * n; ++k) sq[static_cast<size_t>(k / n)] += std::pow(s.grad()[k], 2.0);
  }
  std::vector<double> top, grad;
  SoftmaxStats st{0, 0, 0, 0};
  for (int64_t r = 0; r < rows; ++r) {
    top.push_back(*std::max_element(p.data() + r * n, p.data() + (r + 1) * n));
    grad.push_back(std::sqrt(sq[static_cast<size_t>(r)]));
    st.saturated += top.back() > 0.99 ? 1.0 / static_cast<double>(rows) : 0.0;
  }
  st.top = ag::median(top);
  st.gradient = ag::median(grad);
  double mean = 0;
  for (float v : s.values()) mean += v / static_cast<double>(rows * n);
  for (float v : s.values()) st.spread += (v - mean) * (v - mean) / static_cast<double>(rows * n);
  st.spread = std::sqrt(st.spread);
  return st;
}

void sqrt_dk_section() {
  heading(6, "Why divide by sqrt(dk)");
  constexpr int64_t dk = 64, keys = 16, queries = 1000;
  say("dk = %lld: %lld random queries, each against the same %lld random keys, every\n",
      static_cast<long long>(dk), static_cast<long long>(queries), static_cast<long long>(keys));
  say("entry from N(0, 1) (ag::Rng(42)). q.k sums %lld products, so it spreads like\n",
      static_cast<long long>(dk));
  say("sqrt(dk) = %.0f. Softmax and its backward pass run in the engine.\n\n",
      std::sqrt(static_cast<double>(dk)));
  ag::Rng rng(kSeed);
  auto draw = [&](int64_t rows) {
    std::vector<float> v;
    for (int64_t i = 0; i < rows * dk; ++i) v.push_back(static_cast<float>(rng.normal()));
    return Tensor::from({rows, dk}, std::move(v));
  };
  const Tensor k = draw(keys), q = draw(queries);
  Tensor raw;
  {
    ag::NoGradScope no_grad;
    raw = ag::matmul(q, ag::transpose(k));  // (queries, keys)
  }
  const SoftmaxStats u = softmax_stats(raw);
  const SoftmaxStats s = softmax_stats(ag::scale(raw, 1.0f / std::sqrt(static_cast<float>(dk))));
  const char* const row = "  %-18s %6.2f  %14.3f  %12.2f  %17.4f\n";
  say("%20s %6s  %14s  %12s  %17s\n", "", "score", "largest weight", "share with", "softmax gradient");
  say("%20s %6s  %14s  %12s  %17s\n", "", "spread", "(median)", "weight>0.99", "(median)");
  say(row, "without 1/sqrt(dk)", u.spread, u.top, u.saturated, u.gradient);
  say(row, "with 1/sqrt(dk)", s.spread, s.top, s.saturated, s.gradient);
  say("(softmax gradient: norm of the Jacobian d softmax(s) / d s of one query.)\n");
  say("Unscaled, softmax saturates: the top weight is near 1, %.0f%% of the queries\n", 100 * u.saturated);
  say("put over 0.99 on one key (their gradient is near 0), and the typical gradient\n");
  say("is %.1fx smaller, so q and k learn slowly. Scaled, the scores keep unit spread.\n",
      s.gradient / std::max(u.gradient, 1e-30));
}

// ---- 7 ----
void analogy_section() {
  heading(7, "Attention as a soft database lookup");
  say("query = what am I looking for; key = what do I contain; value = what do I offer.\n");
  say("A database returns the one value whose key matches the query exactly; attention\n");
  say("compares the query with every key and returns a blend of all the values,\n");
  say("weighted by softmax(query . key / sqrt(dk)).\n\n");
  say("Next: attograd train configs/reverse.json   (a small model learns to reverse)\n");
  say("      attograd attend runs/reverse --tokens \"3 1 4\"   (where its heads look)\n");
}

}  // namespace

Output<findings::LessonText> lesson(const LessonRequest& request) {
  if (request.section < 0 || request.section > kLessonSections)
    throw RequestError("section " + std::to_string(request.section) + ": expected 1.." +
                       std::to_string(kLessonSections) + ", or 0 for all");
  static void (*const kSections[])() = {softmax_section,    self_attention_section, causal_section,
                                        multi_head_section, two_sentences_section,  sqrt_dk_section,
                                        analogy_section};
  static_assert(sizeof kSections / sizeof kSections[0] == kLessonSections);
  Output<findings::LessonText> out;
  out.result.section = request.section;
  lesson_text = &out.result.text;
  if (request.section == 0)
    say("attograd demo: self-attention from scratch, the seed lesson step by step.\n");
  for (int n = 1; n <= kLessonSections; ++n)
    if (request.section == 0 || request.section == n) kSections[n - 1]();
  lesson_text = nullptr;
  return out;
}

}  // namespace analysis
