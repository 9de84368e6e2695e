#include "analysis/lens.h"

#include <algorithm>

#include "analysis/residual.h"
#include "io/run_layout.h"

namespace analysis {

Output<findings::LensResult> lens(StudyRun& run, const LensRequest& request) {
  if (!request.wrong.empty() && request.answer.empty()) throw RequestError("wrong needs answer");
  if (!request.save.empty()) {
    const std::string problem = save_name_problem(request.save);
    if (!problem.empty()) throw RequestError("save: " + problem);
  }
  Output<findings::LensResult> out;
  const std::vector<int32_t> ids = input_ids(run, request.input, "input", Bos::kAdd, &out.notes);
  int answer = 0, wrong = -1;
  if (!request.answer.empty()) {
    answer = token_id(run, request.answer, "answer");
    if (!request.wrong.empty()) wrong = token_id(run, request.wrong, "wrong");
    if (answer == wrong)
      throw RequestError("answer and wrong are the same token '" + token_label(run, answer) + "'");
  } else {
    ag::NoGradScope no_grad;  // the model's top prediction at the last position
    const int64_t T = static_cast<int64_t>(ids.size());
    const ag::Tensor<float> logits = run.model->forward(ids, 1, T);
    const int64_t V = logits.size(2);
    const float* row = logits.data() + (T - 1) * V;
    answer = static_cast<int>(std::max_element(row, row + V) - row);
  }
  findings::LensResult& r = out.result;
  r = logit_lens(*run.model, ids, answer, wrong);
  r.positions = token_labels(run, ids);
  r.answer_token = token_label(run, answer);
  r.wrong_token = wrong < 0 ? "mean" : token_label(run, wrong);
  if (!request.save.empty()) out.wrote = save_lens(run, request.save, r);
  return out;
}

std::vector<std::string> save_lens(const StudyRun& run, const std::string& name,
                                   const findings::LensResult& r) {
  return save_named(run, io::layout::lens_stem(run.dir, name), findings::lens_to_json(r, true).dump(1) + "\n",
                    findings::svg_lens(r, picture_title(run, "logit lens '" + name + "'")));
}

}  // namespace analysis
