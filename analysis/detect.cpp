#include "analysis/detect.h"

#include "analysis/capture.h"

namespace analysis {

Output<findings::DetectResult> detect(StudyRun& run, const DetectRequest& request) {
  if (request.mode != "mul" && request.mode != "abs")
    throw RequestError("mode: expected \"mul\" or \"abs\", got \"" + request.mode + "\"");
  if (request.n < 0) throw RequestError("n: must be >= 0, got " + std::to_string(request.n));
  if (!request.input.empty() && request.n > 0)
    throw RequestError("n: goes with the held-out sequences; give input or n, not both");
  const std::string& name = request.pattern;
  const bool named = name == "previous" || name == "duplicate" || name == "induction" || name == "first";
  if (!named && (name.size() < 5 || name.compare(name.size() - 5, 5, ".json") != 0))
    throw RequestError("pattern" + (name.empty() ? "" : " " + name) +
                       ": expected previous, duplicate, induction, first or a FILE.json");
  const findings::DetectionRule rule = findings::detection_rule(name);  // a rule file's errors name the file
  const findings::DetectMode mode =
      request.mode == "abs" ? findings::DetectMode::abs : findings::DetectMode::mul;

  Output<findings::DetectResult> out;
  train::Batch batch;
  if (!request.input.empty()) {
    const std::vector<int32_t> ids = input_ids(run, request.input, "input", Bos::kAdd, &out.notes);
    batch.B = 1;
    batch.T = static_cast<int>(ids.size());
    batch.inputs = ids;
  } else {
    batch = run.task->eval_set(run.config.seed, request.n > 0 ? request.n : run.config.train.eval_size);
  }
  if (rule.rule == "matrix" && rule.matrix.size() != static_cast<size_t>(batch.T))
    throw RequestError("pattern " + rule.describe() + ": the input has " + std::to_string(batch.T) +
                       " tokens; the pattern must be T x T");
  const std::vector<findings::Probe> probes = capture_attention(*run.model, *run.task, batch);
  findings::DetectResult& r = out.result;
  r.pattern = rule.describe();
  r.mode = request.mode;
  r.sequences = batch.B;
  r.heads = findings::detect_heads(probes, rule, mode);
  return out;
}

}  // namespace analysis
