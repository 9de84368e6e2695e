#include "findings/transcoder_view.h"

#include <cmath>

#include "io/append_format.h"

namespace findings {

using nlohmann::json;

namespace {
json number(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
}  // namespace

json transcoder_eval_to_json(const TranscoderEval& e) {
  json layers = json::array();
  for (const TranscoderLayerEval& l : e.layers)
    layers.push_back({{"layer", l.layer},
                      {"in_point", l.in_point},
                      {"out_point", l.out_point},
                      {"d_in", l.d_in},
                      {"d_out", l.d_out},
                      {"d_sae", l.d_sae},
                      {"skip", l.skip},
                      {"mse", number(l.mse)},
                      {"explained_variance", number(l.explained_variance)},
                      {"l0", number(l.l0)},
                      {"dead", l.dead}});
  return {{"tokens", e.tokens},
          {"steps", e.steps},
          {"cross_layer", e.cross_layer},
          {"layers", layers},
          {"ce_clean", number(e.ce_clean)},
          {"ce_replaced", number(e.ce_replaced)},
          {"ce_zero_ablation", number(e.ce_zero_ablation)},
          {"ce_loss_recovered", number(e.ce_loss_recovered)},
          {"kl", number(e.kl)}};
}

std::string transcoder_eval_table(const TranscoderEval& e) {
  std::string out;
  io::append_format(out, "%s on %lld held-out tokens:\n",
                    e.cross_layer ? "cross-layer transcoder" : "transcoders",
                    static_cast<long long>(e.tokens));
  for (const TranscoderLayerEval& l : e.layers)
    io::append_format(
        out, "layer %d: %s -> %s, d_sae %lld%s: explained variance %.4f  mse %.6g  L0 %.2f  dead %lld\n",
        l.layer, l.in_point.c_str(), l.out_point.c_str(), static_cast<long long>(l.d_sae),
        l.skip ? " (skip)" : "", l.explained_variance, l.mse, l.l0, static_cast<long long>(l.dead));
  io::append_format(
      out, "CE clean %.4f  every MLP replaced %.4f  MLPs zero-ablated %.4f  recovered %.4f  KL %.5f\n",
      e.ce_clean, e.ce_replaced, e.ce_zero_ablation, e.ce_loss_recovered, e.kl);
  return out;
}

}  // namespace findings
