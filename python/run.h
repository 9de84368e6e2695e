// attograd.Run: a trained run folder opened for study (analysis::open_run), shared by python/run.cpp (its
// forward, hooks and cache) and python/tools.cpp (every study tool as a method).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/tool.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace pyag {

class Run {
 public:
  explicit Run(const std::string& path) {
    if (!std::filesystem::exists(path)) {
      try {
        (void)train::load_run(path);
      } catch (const std::exception& e) {
        throw FileNotFound(e.what());
      }
    }
    run_ = std::make_shared<analysis::StudyRun>(analysis::open_run(path));
    path_ = path;
  }

  // The open run, shared so that close() during another thread's call leaves that call its run.
  std::shared_ptr<analysis::StudyRun> get() const {
    if (!run_) throw std::runtime_error(path_ + ": the run is closed");
    return run_;
  }
  void close() { run_.reset(); }
  const std::string& path() const { return path_; }

  std::vector<int32_t> ids(const train::LoadedRun& run, py::handle value, const std::string& argument,
                           int64_t* B, int64_t* T) const {
    return token_ids(value, argument, run.task->vocab_size(), run.config.model.max_len, B, T);
  }

  // A token-name string (BOS put in front when missing, as `attograd patch` does) or ids of shape (T,).
  std::vector<int32_t> sequence(const train::LoadedRun& run, py::handle value,
                                const std::string& argument) const {
    if (py::isinstance<py::str>(value))
      return train::input_from_names(run, value.cast<std::string>(), argument, nullptr);
    int64_t B = 0, T = 0;
    std::vector<int32_t> out = ids(run, value, argument, &B, &T);
    if (py::isinstance<py::array>(value) && py::reinterpret_borrow<py::array>(value).ndim() != 1)
      throw std::invalid_argument(argument + ": expected one sequence of shape (T,), got shape (" +
                                  std::to_string(B) + ", " + std::to_string(T) + ")");
    return out;
  }

  // A token given by name or id.
  int token(const analysis::StudyRun& run, py::handle value, const std::string& argument) const {
    if (py::isinstance<py::str>(value)) {  // a name, or the text of one token (analysis::token_id)
      analysis::Token t;
      t.name = value.cast<std::string>();
      return analysis::token_id(run, t, argument);
    }
    if (!py::isinstance<py::int_>(value))
      throw std::invalid_argument(argument + ": expected a token name or id");
    const int64_t id = int_of(value, argument);
    if (id < 0 || id >= run.task->vocab_size())
      throw std::invalid_argument(argument + ": token id " + std::to_string(id) +
                                  " is outside the vocabulary 0.." +
                                  std::to_string(run.task->vocab_size() - 1));
    return static_cast<int>(id);
  }

 private:
  std::shared_ptr<analysis::StudyRun> run_;
  std::string path_;
};

// A batch of the task as {"ids": (B, T) int32 inputs, "targets": (B, T) next tokens (-1 where not scored),
// "scored", "is_padding": (B, T) bool} (run.sample, attograd.Task).
py::dict batch_dict(const train::Batch& batch);

// Every study tool of study/tools.h: Run.NAME(...) for the tools that read a run, attograd.NAME(...) for
// the others (python/tools.cpp).
void bind_tools(py::module_& m, py::class_<Run>& run_class);

}  // namespace pyag
