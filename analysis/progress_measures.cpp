// The progress measures observer (see progress_measures.h).
#include "analysis/progress_measures.h"

#include <filesystem>
#include <fstream>

#include "io/atomic_file.h"
#include "io/run_layout.h"

namespace analysis {

ProgressMeasures::ProgressMeasures(const train::Task& task, std::string run_dir, int every)
    : data_(modular_addition(task)), path_(io::layout::measures_jsonl(run_dir)), every_(every) {}

void ProgressMeasures::on_start(const train::Config&, int64_t first_step, int64_t) {
  // A fresh run starts an empty file; a resumed one keeps the lines up to its checkpoint's step.
  std::string kept;
  if (first_step > 0 && std::filesystem::exists(path_)) {
    for (const findings::FourierMeasures& m : findings::read_measures(path_))
      if (m.step <= first_step) kept += findings::measures_to_json(m).dump() + "\n";
  }
  io::write_text_file_atomically(path_, kept);
  last_ = first_step;
}

void ProgressMeasures::on_model(const nn::CausalLM<float>& model, int64_t step, bool finished) {
  if (step == last_ && step > 0) return;
  if (step % every_ != 0 && !finished) return;
  const findings::FourierReport r = fourier_analysis(model, data_, step);
  std::ofstream out(path_, std::ios::app);
  out << findings::measures_to_json(r.measures).dump() << "\n";
  out.flush();
  if (!out) throw io::WriteError(path_ + ": cannot append a line");
  last_ = step;
}

}  // namespace analysis
