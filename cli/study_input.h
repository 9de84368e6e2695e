// Shared by `attograd attend` and `attograd compare` (and, for the input and its maps, `attograd forward`):
// their --layer/--head options, loading the run and checking --layer/--head against the model, turning
// --tokens/--ids into model input (with the task's BOS put in front when the user left it out), running one
// batch of inputs to get their maps, and laying text panels side by side.
// Not for training or scores: train/ and study/ own those.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/print.h"
#include "findings/attention_maps.h"
#include "train/run_folder.h"

namespace cli {

// A study command's --layer and --head, each empty when the command line leaves it out.
class LayerHeadOptions {
 public:
  // Registers both on `sub`; `note` ends both help texts.
  void add_to(CLI::App* sub, const std::string& note = "");
  std::optional<int> layer() const;
  std::optional<int> head() const;

 private:
  int layer_ = 0, head_ = 0;
  CLI::Option *layer_opt_ = nullptr, *head_opt_ = nullptr;
};

// The run in `dir`, with the engine's threads set as its config says; throws UsageError when `layer` or
// `head` is outside the model (see check_layer_head).
train::LoadedRun load_for_study(const std::string& dir, std::optional<int> layer, std::optional<int> head);

// Shared with the Python module: train/run_folder.h.
using train::check_input_length;
using train::held_out_count;
using train::input_from_ids;
using train::input_from_names;

// Throws UsageError "--layer 5: the model has layers 0..1" (or "--head ...") when out of range.
void check_layer_head(const train::LoadedRun& run, std::optional<int> layer, std::optional<int> head);

// Each input's maps (all of the same length), one Probe per input; the same pass's logits (B, T, V) go
// to `logits` when it is given.
std::vector<findings::Probe> probe_inputs(train::LoadedRun& run,
                                          const std::vector<std::vector<int32_t>>& inputs,
                                          ag::Tensor<float>* logits = nullptr);

// The probe with only the maps of the given layer and/or head (all maps when neither is given).
findings::Probe select_maps(const findings::Probe& probe, std::optional<int> layer, std::optional<int> head);

// The first `n` lines of a rendered picture (drops trailing legend lines), or all when n < 0.
std::vector<std::string> text_lines(const std::string& text, int n = -1);
// Panels next to each other, `gap` columns apart, each padded to its widest line (UTF-8 aware);
// trailing spaces trimmed.
std::string side_by_side(const std::vector<std::vector<std::string>>& panels, int gap = 3);

// Prints the line that says input_from_names put BOS in front.
void print_bos_added(const train::LoadedRun& run);

}  // namespace cli
