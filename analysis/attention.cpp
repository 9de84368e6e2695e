#include "analysis/attention.h"

#include <algorithm>

#include "analysis/capture.h"
#include "findings/svg_heatmap.h"
#include "io/atomic_file.h"
#include "train/evaluate.h"

namespace analysis {

namespace {

// Each input's maps (all of the same length), one Probe per input, from one batch; the same pass's logits
// (B, T, V) go to `logits` when it is given.
std::vector<findings::Probe> probe_inputs(StudyRun& run, const std::vector<std::vector<int32_t>>& inputs,
                                          ag::Tensor<float>* logits = nullptr) {
  train::Batch batch;
  batch.B = static_cast<int>(inputs.size());
  batch.T = static_cast<int>(inputs.front().size());
  for (const auto& ids : inputs) batch.inputs.insert(batch.inputs.end(), ids.begin(), ids.end());
  batch.targets.assign(batch.inputs.size(), -1);
  return capture_attention(*run.model, *run.task, batch, logits);
}

// The probe with only the maps of the given layer and/or head (all maps when neither is given), by
// (layer, head).
findings::Probe select_maps(const findings::Probe& probe, std::optional<int> layer, std::optional<int> head) {
  findings::Probe out{probe.ids, probe.tokens, {}};
  for (const findings::HeadMap& m : probe.maps)
    if ((!layer || m.layer == *layer) && (!head || m.head == *head)) out.maps.push_back(m);
  std::sort(out.maps.begin(), out.maps.end(), [](const findings::HeadMap& a, const findings::HeadMap& b) {
    return std::make_pair(a.layer, a.head) < std::make_pair(b.layer, b.head);
  });
  return out;
}

std::string picture_title(const StudyRun& run) {
  return run.config.name + ", step " + std::to_string(run.step) + ": ";
}

std::string joined(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

}  // namespace

Output<findings::ForwardResult> forward(StudyRun& run, const ForwardRequest& request) {
  Output<findings::ForwardResult> out;
  // Taken as given, BOS or not: forward shows what the model does on exactly this input.
  const std::vector<int32_t> ids = input_ids(run, request.input, "input", Bos::kAsGiven);
  const int64_t T = static_cast<int64_t>(ids.size());
  ag::Tensor<float> logits;  // (1, T, V), from the same forward pass as the maps
  findings::ForwardResult& r = out.result;
  r.probe = probe_inputs(run, {ids}, &logits).front();
  const int64_t V = logits.size(-1);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits.data() + t * V;
    r.logits.emplace_back(row, row + V);
    r.predictions.push_back(static_cast<int>(std::max_element(row, row + V) - row));
    r.predicted.push_back(token_label(run, r.predictions.back()));
  }
  return out;
}

Output<findings::AttendResult> attend(StudyRun& run, const AttendRequest& request) {
  check_layer_head(run, request.layer, request.head);
  Output<findings::AttendResult> out;
  const std::vector<int32_t> ids = input_ids(run, request.input, "input", Bos::kAdd, &out.notes);
  out.result.probe = select_maps(probe_inputs(run, {ids}).front(), request.layer, request.head);
  out.result.every_head = !request.layer && !request.head;
  if (!request.svg.empty()) out.wrote = save_attend(run, request.svg, out.result);
  return out;
}

Output<findings::CompareResult> compare(StudyRun& run, const CompareRequest& request) {
  check_layer_head(run, request.layer, request.head);
  Output<findings::CompareResult> out;
  const std::vector<int32_t> a = input_ids(run, request.a, "a", Bos::kAdd, &out.notes);
  const std::vector<int32_t> b = input_ids(run, request.b, "b", Bos::kAdd, &out.notes);
  if (a.size() != b.size())
    throw RequestError("a has " + std::to_string(a.size()) + " tokens but b has " + std::to_string(b.size()) +
                       (out.notes.empty() ? "" : " (counting the BOS put in front)") +
                       ": compare needs two inputs of the same length, to line their maps up position by "
                       "position");
  const std::vector<findings::Probe> probes = probe_inputs(run, {a, b});
  findings::CompareResult& r = out.result;
  r.a = select_maps(probes[0], request.layer, request.head);
  r.b = select_maps(probes[1], request.layer, request.head);
  for (size_t k = 0; k < r.a.maps.size(); ++k)
    r.heads.push_back({r.a.maps[k].layer, r.a.maps[k].head,
                       findings::total_variation(r.a.maps[k].weights, r.b.maps[k].weights)});
  if (!request.svg.empty()) out.wrote = save_compare(run, request.svg, r);
  return out;
}

std::vector<std::string> save_attend(const StudyRun& run, const std::string& path,
                                     const findings::AttendResult& r) {
  findings::SvgOptions svg;
  svg.title = picture_title(run) + joined(r.probe.tokens);
  io::write_user_file(path, findings::svg_attention_grid(r.probe, svg));
  return {path};
}

std::vector<std::string> save_compare(const StudyRun& run, const std::string& path,
                                      const findings::CompareResult& r) {
  findings::SvgOptions svg;
  svg.title = picture_title(run) + "A = " + joined(r.a.tokens) + ", B = " + joined(r.b.tokens);
  io::write_user_file(path, findings::svg_compare(r.a, r.b, svg));
  return {path};
}

}  // namespace analysis
