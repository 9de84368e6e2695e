// attograd tms [--n N] [--m M] [--sparsity S] [--importance R] [--seed S] [--json] [--out FILE]: Toy
// Models of Superposition (study/tms.h). With --json, one model at one sparsity as {"W", "b", "loss"};
// without, a sweep of sparsities, a table of each feature's norm and superposition, and the figure.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "findings/tms_view.h"
#include "io/atomic_file.h"
#include "study/tms.h"

namespace cli {

namespace {

struct Args {
  study::TmsConfig config;
  std::string out;
  bool json = false;
};

int run_tms(const Args& a) {
  const study::TmsConfig& c = a.config;
  if (c.m >= c.n)
    throw UsageError("--m " + std::to_string(c.m) + ": expected fewer dimensions than --n (" +
                     std::to_string(c.n) + ")");
  if (a.json) {
    const study::TmsResult r = study::train_tms(c);
    nlohmann::json W = nlohmann::json::array();
    for (int k = 0; k < c.m; ++k)
      W.push_back(std::vector<float>(r.W.begin() + k * c.n, r.W.begin() + (k + 1) * c.n));
    std::printf("%s\n", nlohmann::json{{"W", W}, {"b", r.b}, {"loss", r.loss}}.dump().c_str());
    return 0;
  }
  const std::vector<double> sweep = {0.0, 0.7, 0.9, 0.97, 0.99, 0.997};
  std::vector<findings::TmsPanel> panels;
  std::printf("n %d, m %d, importance %g^i: feature norms ||W_i|| (superposition)\n", c.n, c.m, c.importance);
  for (double s : sweep) {
    study::TmsConfig ci = c;
    ci.sparsity = s;
    const study::TmsResult r = study::train_tms(ci);
    findings::TmsPanel p{
        s, c.m, c.n, r.W, study::tms_norms(r, c.m, c.n), study::tms_superposition(r, c.m, c.n)};
    int stored = 0;
    std::printf("S %-6g loss %.5f |", s, r.loss);
    for (int i = 0; i < c.n; ++i) {
      stored += p.norms[i] > 0.5;
      std::printf(" %.2f(%.2f)", p.norms[i], p.superposition[i]);
    }
    std::printf(" | stored %d\n", stored);
    panels.push_back(std::move(p));
  }
  const std::string out =
      a.out.empty() ? "tms-n" + std::to_string(c.n) + "-m" + std::to_string(c.m) + ".svg" : a.out;
  char title[128];
  std::snprintf(title, sizeof title,
                "Toy model of superposition: n %d features in m %d dims, importance %g^i", c.n, c.m,
                c.importance);
  io::write_text_file_atomically(out, findings::svg_tms(title, panels));
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

Command add_tms(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "tms",
      "toy models of superposition: n features in m dims, x' = ReLU(W^T W x + b), over a sweep of sparsity");
  sub->footer(
      "Without --json: trains one model per sparsity in 0, 0.7, 0.9, 0.97, 0.99, 0.997, prints each "
      "feature's\n"
      "norm and superposition, and writes the figure (docs/sae.md).\n"
      "Examples: attograd tms --n 5 --m 2;  attograd tms --n 20 --m 5 --importance 0.7");
  sub->add_option("--n", a->config.n, "features (default 5)")->check(CLI::Range(2, 1000));
  sub->add_option("--m", a->config.m, "hidden dimensions (default 2)")->check(CLI::Range(1, 1000));
  sub->add_option("--sparsity", a->config.sparsity,
                  "probability that a feature is 0, with --json (default 0)")
      ->check(CLI::Range(0.0, 0.9999));
  sub->add_option("--importance", a->config.importance, "feature i's importance is R^i (default 1)")
      ->check(CLI::Range(0.01, 1.0));
  sub->add_option("--steps", a->config.steps, "training steps (default 5000)")->check(CLI::Range(1, 1000000));
  sub->add_option("--seed", a->config.seed, "seed (default 1)");
  sub->add_option("--out", a->out, "the figure's file (default tms-nN-mM.svg)");
  sub->add_flag("--json", a->json,
                "train at --sparsity and print {\"W\" (m x n), \"b\", \"loss\"} on one line");
  return [a] { return run_tms(*a); };
}

}  // namespace cli
