// Head-score formulas and their pooling over probes (see head_scores.h).
#include "analysis/head_scores.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace analysis {
namespace {

using findings::AttentionWeights;
using findings::check_square;
using findings::HeadMap;
using findings::HeadScores;
using findings::Probe;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

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

}  // namespace analysis
