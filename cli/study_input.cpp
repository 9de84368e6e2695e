#include "cli/study_input.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "autograd/threads.h"
#include "cli/commands.h"
#include "findings/ascii_heatmap.h"
#include "findings/utf8_label.h"
#include "study/capture.h"
#include "train/evaluate.h"
#include "train/token_input.h"

namespace cli {

void LayerHeadOptions::add_to(CLI::App* sub, const std::string& note) {
  layer_opt_ = sub->add_option("--layer", layer_, "only this layer (from 0)" + note);
  head_opt_ = sub->add_option("--head", head_, "only this head (from 0)" + note);
}

std::optional<int> LayerHeadOptions::layer() const {
  return layer_opt_->count() ? std::optional<int>(layer_) : std::nullopt;
}

std::optional<int> LayerHeadOptions::head() const {
  return head_opt_->count() ? std::optional<int>(head_) : std::nullopt;
}

train::LoadedRun load_for_study(const std::string& dir, std::optional<int> layer, std::optional<int> head) {
  train::LoadedRun run = train::load_run(dir);
  ag::set_num_threads(
      std::min(run.config.train.threads, train::max_threads()));  // may come from a larger machine
  check_layer_head(run, layer, head);
  return run;
}

void check_layer_head(const train::LoadedRun& run, std::optional<int> layer, std::optional<int> head) {
  const int L = static_cast<int>(run.model->blocks.size());
  const int H = static_cast<int>(run.config.model.n_heads);
  if (layer && (*layer < 0 || *layer >= L))
    throw UsageError("--layer " + std::to_string(*layer) + ": the model has " + std::to_string(L) +
                     (L == 1 ? " layer (valid: 0)" : " layers (valid: 0.." + std::to_string(L - 1) + ")"));
  if (head && (*head < 0 || *head >= H))
    throw UsageError("--head " + std::to_string(*head) + ": the model has " + std::to_string(H) +
                     (H == 1 ? " head per layer (valid: 0)"
                             : " heads per layer (valid: 0.." + std::to_string(H - 1) + ")"));
}

std::vector<findings::Probe> probe_inputs(train::LoadedRun& run,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          ag::Tensor<float>* logits) {
  train::Batch batch;
  batch.B = static_cast<int>(inputs.size());
  batch.T = static_cast<int>(inputs.front().size());
  for (const auto& ids : inputs) batch.inputs.insert(batch.inputs.end(), ids.begin(), ids.end());
  batch.targets.assign(batch.inputs.size(), -1);
  return study::capture_attention(*run.model, *run.task, batch, logits);
}

findings::Probe select_maps(const findings::Probe& probe, std::optional<int> layer, std::optional<int> head) {
  findings::Probe out{probe.ids, probe.tokens, {}};
  for (const findings::HeadMap& m : probe.maps)
    if ((!layer || m.layer == *layer) && (!head || m.head == *head)) out.maps.push_back(m);
  std::sort(out.maps.begin(), out.maps.end(), [](const findings::HeadMap& a, const findings::HeadMap& b) {
    return std::make_pair(a.layer, a.head) < std::make_pair(b.layer, b.head);
  });
  return out;
}

std::vector<std::string> text_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line) && (n < 0 || static_cast<int>(lines.size()) < n);)
    lines.push_back(line);
  return lines;
}

std::string side_by_side(const std::vector<std::vector<std::string>>& panels, int gap) {
  size_t rows = 0;
  std::vector<int> widths;
  for (const auto& p : panels) {
    rows = std::max(rows, p.size());
    int w = 0;
    for (const std::string& line : p) w = std::max(w, findings::display_width(line));
    widths.push_back(w);
  }
  std::string out;
  for (size_t r = 0; r < rows; ++r) {
    std::string line;
    for (size_t k = 0; k < panels.size(); ++k) {
      const std::string cell = r < panels[k].size() ? panels[k][r] : "";
      line += cell;
      if (k + 1 < panels.size())
        line.append(static_cast<size_t>(widths[k] - findings::display_width(cell) + gap), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

void print_bos_added(const train::LoadedRun& run) {
  std::printf("(BOS put in front: every %s sequence starts with it; write it yourself to silence this)\n",
              run.config.task.kind.c_str());
}

}  // namespace cli
