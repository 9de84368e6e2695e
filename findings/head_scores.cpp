// scores.json and the score table (see head_scores.h).
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

}  // namespace

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
