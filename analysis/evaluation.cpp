#include "analysis/evaluation.h"

#include <cmath>
#include <limits>

#include "train/evaluate.h"

namespace analysis {

Output<findings::EvalReport> evaluate(StudyRun& run, const EvalRequest& request) {
  const bool held_out = request.split == "heldout";
  if (!held_out && request.split != "train")
    throw RequestError("split: expected \"heldout\" or \"train\", got \"" + request.split + "\"");
  if (request.n < 0)
    throw RequestError("n: expected at least 1 (0 = the default), got " + std::to_string(request.n));
  if (!held_out && !run.task->finite())
    throw RequestError("split train: " + run.dir +
                       " trains on a stream of fresh sequences; only a finite dataset has a training set");
  // Held out: bounded as train.eval_size is; the training side of a finite dataset is bounded by its size.
  const int n = held_out        ? train::held_out_count(run, request.n, "n")
                : request.n > 0 ? request.n
                                : std::numeric_limits<int>::max();
  const train::EvalResult r = train::evaluate(
      *run.model, held_out ? run.task->eval_set(run.config.seed, n) : run.task->split_set(false, n));
  Output<findings::EvalReport> out;
  out.result.split = request.split;
  out.result.acc = r.acc;
  out.result.loss = r.loss;
  out.result.n = r.n;
  if (run.config.task.kind == "text") {
    out.result.bits_per_token = r.loss / std::log(2.0);
    const std::string& unit = run.config.task.unit;
    out.result.unit = unit == "byte" ? "byte" : unit == "bpe" ? "token" : "character";
  }
  return out;
}

}  // namespace analysis
