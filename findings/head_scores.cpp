// Head-score formulas, their pooling over probes, scores.json and the score table (see head_scores.h).
#include "findings/head_scores.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

#include "io/atomic_file.h"
#include "io/json_error.h"

namespace findings {
namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using io::json_error;
using io::json_member;
using io::json_nonnegative_integer;

// A score: a number, or null for an undefined one (NaN is not JSON).
double score_value(const json& j, const std::string& source, const std::string& ptr) {
  if (j.is_null()) return kNaN;
  if (!j.is_number()) json_error(source, ptr, std::string("expected a number or null, got ") + j.type_name());
  return j.get<double>();
}

json score_json(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// Checks one id per row, each >= 0, and returns the largest id (-1 for none).
int check_ids(const AttentionWeights& w, const std::vector<int>& ids, const char* what) {
  check_square(w, what);
  if (ids.size() != w.size())
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(w.size()) +
                                " token ids, got " + std::to_string(ids.size()));
  int max_id = -1;
  for (int id : ids) {
    if (id < 0)
      throw std::invalid_argument(std::string(what) + ": token ids must be >= 0, got " + std::to_string(id));
    max_id = std::max(max_id, id);
  }
  return max_id;
}

}  // namespace

double ScoreSum::mean() const {
  return rows > 0 ? sum / static_cast<double>(rows) : kNaN;
}

ScoreSum task_mass(const AttentionWeights& w, const std::vector<std::vector<int>>& ideal_keys) {
  check_square(w, "task_mass");
  const int T = static_cast<int>(w.size());
  if (static_cast<int>(ideal_keys.size()) != T)
    throw std::invalid_argument("task_mass: expected ideal keys for " + std::to_string(T) + " rows, got " +
                                std::to_string(ideal_keys.size()));
  ScoreSum s;
  for (int i = 0; i < T; ++i) {
    const std::vector<int>& keys = ideal_keys[i];
    if (keys.empty()) continue;
    double mass = 0;
    for (size_t a = 0; a < keys.size(); ++a) {
      const int k = keys[a];
      if (k < 0 || k >= T)
        throw std::invalid_argument("task_mass: row " + std::to_string(i) + ": ideal key " +
                                    std::to_string(k) + " is outside [0, " + std::to_string(T) + ")");
      // A position listed twice still holds its weight once: mass never exceeds the row's total.
      if (std::find(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(a), k) !=
          keys.begin() + static_cast<std::ptrdiff_t>(a))
        continue;
      mass += w[i][k];
    }
    s.sum += mass;
    ++s.rows;
  }
  return s;
}

ScoreSum previous_token_mass(const AttentionWeights& w) {
  check_square(w, "previous_token_mass");
  ScoreSum s;
  for (size_t i = 1; i < w.size(); ++i) {
    s.sum += w[i][i - 1];
    ++s.rows;
  }
  return s;
}

ScoreSum induction_mass(const AttentionWeights& w, const std::vector<int>& ids) {
  const int max_id = check_ids(w, ids, "induction_mass");
  // last[id]: the most recent position of id seen so far (one allocation per map, not per row).
  std::vector<int> last(static_cast<size_t>(max_id + 1), -1);
  ScoreSum s;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int j = last[static_cast<size_t>(ids[i])];
    if (j >= 0) {
      s.sum += w[i][static_cast<size_t>(j) + 1];  // j + 1 <= i: never a masked key
      ++s.rows;
    }
    last[static_cast<size_t>(ids[i])] = static_cast<int>(i);
  }
  return s;
}

ScoreSum first_token_mass(const AttentionWeights& w) {
  check_square(w, "first_token_mass");
  ScoreSum s;
  for (const auto& row : w) {
    s.sum += row[0];
    ++s.rows;
  }
  return s;
}

ScoreSum duplicate_token_mass(const AttentionWeights& w, const std::vector<int>& ids) {
  const int max_id = check_ids(w, ids, "duplicate_token_mass");
  // seen[id]: whether id occurred before the current row (the row is skipped until it has).
  std::vector<char> seen(static_cast<size_t>(max_id + 1), 0);
  ScoreSum s;
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t id = static_cast<size_t>(ids[i]);
    if (seen[id]) {
      double mass = 0;
      for (size_t j = 0; j < i; ++j)  // every earlier copy, not only the most recent; never the row itself
        if (ids[j] == ids[i]) mass += w[i][j];
      s.sum += mass;
      ++s.rows;
    }
    seen[id] = 1;
  }
  return s;
}

std::vector<HeadScores> compute_head_scores(const std::vector<Probe>& probes,
                                            const std::vector<std::vector<std::vector<int>>>& ideal_keys,
                                            const std::vector<Probe>& repeated_probes) {
  if (!ideal_keys.empty() && ideal_keys.size() != probes.size())
    throw std::invalid_argument("compute_head_scores: expected ideal keys for " +
                                std::to_string(probes.size()) + " probes, got " +
                                std::to_string(ideal_keys.size()));
  struct Sums {
    ScoreSum task, previous, induction, first, duplicate;
  };
  std::map<std::pair<int, int>, Sums> sums;  // every head seen in either set of probes
  for (size_t p = 0; p < probes.size(); ++p) {
    const Probe& probe = probes[p];
    for (const HeadMap& m : probe.maps) {
      if (m.weights.size() != probe.ids.size())
        throw std::invalid_argument("compute_head_scores: probe " + std::to_string(p) + " has " +
                                    std::to_string(probe.ids.size()) + " tokens but a " +
                                    std::to_string(m.weights.size()) + "-row map");
      Sums& s = sums[{m.layer, m.head}];
      s.previous.add(previous_token_mass(m.weights));
      s.first.add(first_token_mass(m.weights));
      if (!ideal_keys.empty() && !ideal_keys[p].empty()) s.task.add(task_mass(m.weights, ideal_keys[p]));
    }
  }
  for (const Probe& probe : repeated_probes)
    for (const HeadMap& m : probe.maps) {
      Sums& s = sums[{m.layer, m.head}];
      s.induction.add(induction_mass(m.weights, probe.ids));
      s.duplicate.add(duplicate_token_mass(m.weights, probe.ids));
    }

  std::vector<HeadScores> out;
  out.reserve(sums.size());
  for (const auto& [key, s] : sums) {
    HeadScores h;
    h.layer = key.first;
    h.head = key.second;
    h.task = s.task.mean();
    h.previous_token = s.previous.mean();
    h.induction = s.induction.mean();
    h.first_token = s.first.mean();
    h.duplicate_token = s.duplicate.mean();
    out.push_back(h);
  }
  return out;
}

nlohmann::json head_scores_to_json(const HeadScoresFile& scores) {
  json heads = json::array();
  for (const HeadScores& h : scores.heads) {
    json o = {{"layer", h.layer},
              {"head", h.head},
              {"task", score_json(h.task)},
              {"previous_token", score_json(h.previous_token)},
              {"induction", score_json(h.induction)},
              {"first_token", score_json(h.first_token)},
              {"duplicate_token", score_json(h.duplicate_token)}};
    if (h.ablation) {
      json a = {{"zero_acc", score_json(h.ablation->zero_acc)},
                {"mean_acc", score_json(h.ablation->mean_acc)}};
      if (h.ablation->zero_loss) a["zero_loss"] = score_json(*h.ablation->zero_loss);
      if (h.ablation->mean_loss) a["mean_loss"] = score_json(*h.ablation->mean_loss);
      o["ablation"] = std::move(a);
    }
    heads.push_back(std::move(o));
  }
  json out = {{"step", scores.step}, {"heads", std::move(heads)}};
  if (const auto& pc = scores.phase_change) {
    const auto step = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    out["phase_change"] = {{"induction", step(pc->induction)},
                           {"task", step(pc->task)},
                           {"previous_token", step(pc->previous_token)},
                           {"eval_loss_fastest_fall", step(pc->eval_loss_fall)}};
  }
  if (scores.wall_seconds) out["wall_seconds"] = *scores.wall_seconds;
  return out;
}

HeadScoresFile head_scores_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object())
    json_error(source, "", std::string("expected an object {\"step\", \"heads\"}, got ") + j.type_name());
  HeadScoresFile f;
  f.step = json_nonnegative_integer(json_member(j, "step", source, ""), source, "/step");
  const json& heads = io::json_array(json_member(j, "heads", source, ""), source, "/heads");
  for (size_t k = 0; k < heads.size(); ++k) {
    const std::string p = "/heads/" + std::to_string(k);
    const json& o = heads[k];
    if (!o.is_object()) json_error(source, p, std::string("expected an object, got ") + o.type_name());
    HeadScores h;
    h.layer =
        static_cast<int>(json_nonnegative_integer(json_member(o, "layer", source, p), source, p + "/layer"));
    h.head =
        static_cast<int>(json_nonnegative_integer(json_member(o, "head", source, p), source, p + "/head"));
    h.task = score_value(json_member(o, "task", source, p), source, p + "/task");
    h.previous_token =
        score_value(json_member(o, "previous_token", source, p), source, p + "/previous_token");
    h.induction = score_value(json_member(o, "induction", source, p), source, p + "/induction");
    h.first_token = score_value(json_member(o, "first_token", source, p), source, p + "/first_token");
    // Optional: scores.json files written before the duplicate-token score have no key (undefined).
    const auto dup = o.find("duplicate_token");
    h.duplicate_token = dup == o.end() ? kNaN : score_value(*dup, source, p + "/duplicate_token");
    auto it = o.find("ablation");
    if (it != o.end() && !it->is_null()) {
      const std::string ap = p + "/ablation";
      if (!it->is_object()) json_error(source, ap, std::string("expected an object, got ") + it->type_name());
      AblationResult a;
      a.zero_acc = score_value(json_member(*it, "zero_acc", source, ap), source, ap + "/zero_acc");
      a.mean_acc = score_value(json_member(*it, "mean_acc", source, ap), source, ap + "/mean_acc");
      if (auto z = it->find("zero_loss"); z != it->end())
        a.zero_loss = score_value(*z, source, ap + "/zero_loss");
      if (auto m = it->find("mean_loss"); m != it->end())
        a.mean_loss = score_value(*m, source, ap + "/mean_loss");
      h.ablation = a;
    }
    f.heads.push_back(h);
  }
  if (auto pc = j.find("phase_change"); pc != j.end() && !pc->is_null()) {
    if (!pc->is_object())
      json_error(source, "/phase_change", std::string("expected an object, got ") + pc->type_name());
    const auto step = [&](const char* key) -> std::optional<double> {
      auto it = pc->find(key);
      if (it == pc->end() || it->is_null()) return std::nullopt;
      if (!it->is_number())
        json_error(source, std::string("/phase_change/") + key,
                   std::string("expected a number or null, got ") + it->type_name());
      return it->get<double>();
    };
    f.phase_change =
        PhaseChange{step("induction"), step("task"), step("previous_token"), step("eval_loss_fastest_fall")};
  }
  if (auto w = j.find("wall_seconds"); w != j.end() && !w->is_null()) {
    if (!w->is_number())
      json_error(source, "/wall_seconds", std::string("expected a number, got ") + w->type_name());
    f.wall_seconds = w->get<double>();
  }
  return f;
}

HeadScoresFile read_head_scores(const std::string& path) {
  return head_scores_from_json(io::read_json_file(path), path);
}

void write_head_scores(const std::string& path, const HeadScoresFile& scores) {
  const std::string text = head_scores_to_json(scores).dump(2) + "\n";
  // Read back first: a value its reader refuses is an error, not a file.
  head_scores_from_json(io::parse_json(text, path), path + " (not written)");
  io::write_text_file_atomically(path, text);
}

std::string head_scores_table(const std::vector<HeadScores>& heads) {
  bool any_ablation = false, any_loss = false;
  for (const HeadScores& h : heads) {
    if (!h.ablation) continue;
    any_ablation = true;
    any_loss = any_loss || h.ablation->zero_loss || h.ablation->mean_loss;
  }
  // Columns as (title, getter, notable-is-highest).
  struct Column {
    const char* title;
    double (*get)(const HeadScores&);
    bool highest;
  };
  static constexpr double nan = kNaN;
  std::vector<Column> cols = {
      {"task", [](const HeadScores& h) { return h.task; }, true},
      {"prev_tok", [](const HeadScores& h) { return h.previous_token; }, true},
      {"induction", [](const HeadScores& h) { return h.induction; }, true},
      {"first_tok", [](const HeadScores& h) { return h.first_token; }, true},
      {"dup_tok", [](const HeadScores& h) { return h.duplicate_token; }, true},
  };
  if (any_ablation) {
    cols.push_back(
        {"zero_acc", [](const HeadScores& h) { return h.ablation ? h.ablation->zero_acc : nan; }, false});
    cols.push_back(
        {"mean_acc", [](const HeadScores& h) { return h.ablation ? h.ablation->mean_acc : nan; }, false});
  }
  if (any_loss) {
    cols.push_back({"zero_loss",
                    [](const HeadScores& h) {
                      return h.ablation && h.ablation->zero_loss ? *h.ablation->zero_loss : nan;
                    },
                    true});
    cols.push_back({"mean_loss",
                    [](const HeadScores& h) {
                      return h.ablation && h.ablation->mean_loss ? *h.ablation->mean_loss : nan;
                    },
                    true});
  }
  // The notable row of each column (ties: the first).
  std::vector<int> notable(cols.size(), -1);
  for (size_t c = 0; c < cols.size(); ++c) {
    for (size_t r = 0; r < heads.size(); ++r) {
      const double v = cols[c].get(heads[r]);
      if (!std::isfinite(v)) continue;
      const int best = notable[c];
      if (best < 0 || (cols[c].highest ? v > cols[c].get(heads[best]) : v < cols[c].get(heads[best])))
        notable[c] = static_cast<int>(r);
    }
  }
  std::string out = "layer head";
  char buf[64];
  for (const Column& c : cols) {
    std::snprintf(buf, sizeof buf, " %9s", c.title);
    out += buf;
  }
  out += '\n';
  for (size_t r = 0; r < heads.size(); ++r) {
    std::snprintf(buf, sizeof buf, "%5d %4d", heads[r].layer, heads[r].head);
    out += buf;
    for (size_t c = 0; c < cols.size(); ++c) {
      const double v = cols[c].get(heads[r]);
      if (std::isfinite(v))
        std::snprintf(buf, sizeof buf, " %8.3f%c", v, notable[c] == static_cast<int>(r) ? '*' : ' ');
      else
        std::snprintf(buf, sizeof buf, " %8s ", "-");
      out += buf;
    }
    out += '\n';
  }
  out += "* most notable head per column: the highest score";
  if (any_ablation) out += ",\n  the lowest accuracy or highest loss when ablated";
  out += "; - undefined (no row to score)\n";
  return out;
}

}  // namespace findings
