// attograd.train(config, out=None, overwrite=False, progress=None, set=[], resume=False) -> Run: `attograd
// train` (and `attograd train --resume RUN`) from Python.
// The config (a dict, or a path with its --set overrides) is validated as the command line validates it,
// the run folder prepared and trained with the run's study (runner/train_run.h), the GIL released while the
// C++ side works. Ctrl-C stops the run with a checkpoint and raises KeyboardInterrupt.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>

#include "python/bindings.h"
#include "python/convert.h"
#include "runner/run_state.h"
#include "runner/train_run.h"
#include "train/config.h"
#include "train/metrics_log.h"

namespace pyag {

namespace {

// Between steps (on the training thread, without the GIL): Python's pending signals every 50 ms, so that
// Ctrl-C asks for a checkpoint and a stop, and the progress callable at every logged step. An exception from
// the callable stops the run too, and is raised once training has returned.
class PythonObserver : public train::TrainObserver {
 public:
  PythonObserver(py::object progress, std::atomic<bool>* stop)
      : progress_(std::move(progress)), stop_(stop) {}

  void on_step(const train::MetricsRecord&, double) override {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check_ < std::chrono::milliseconds(50)) return;
    last_check_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {  // the SIGINT handler raised KeyboardInterrupt
      PyErr_Clear();
      interrupted_ = true;
      stop_->store(true);
    }
  }

  void on_log(const train::MetricsRecord& r) override {
    if (progress_.is_none() || error_) return;
    py::gil_scoped_acquire gil;
    try {
      progress_(json_to_python(train::metrics_to_json(r)));
    } catch (py::error_already_set& e) {
      // Ctrl-C while Python runs the callable arrives as its KeyboardInterrupt: a stop like any other.
      if (e.matches(PyExc_KeyboardInterrupt))
        interrupted_ = true;
      else
        error_.emplace(std::move(e));
      stop_->store(true);
    }
  }

  bool interrupted() const { return interrupted_; }
  std::optional<py::error_already_set>& error() { return error_; }

 private:
  py::object progress_;
  std::atomic<bool>* stop_;
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
  bool interrupted_ = false;
  std::optional<py::error_already_set> error_;
};

// A run folder given as a path (str or os.PathLike); `field` names the argument.
std::string resume_folder(py::handle src, const std::string& field = "config") {
  if (py::isinstance<py::str>(src) || py::hasattr(src, "__fspath__"))
    return py::str(py::module_::import("os").attr("fspath")(src)).cast<std::string>();
  throw std::invalid_argument(field + ": expected a run folder (a path), got " + type_name(src));
}

py::object train_run(py::handle config_value, py::object out_value, bool overwrite, py::object progress,
                     const std::vector<std::string>& sets, bool resume) {
  if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
    throw std::invalid_argument("progress: expected a function fn(record) or None");
  train::Config config;
  std::string run_dir;
  if (resume) {
    if (!out_value.is_none())
      throw std::invalid_argument("out: not with resume=True (the run stays where it is)");
    if (overwrite) throw std::invalid_argument("overwrite: not with resume=True");
    run_dir = resume_folder(config_value);
  } else {
    config = read_config(config_value, sets);
    if (!out_value.is_none()) {
      const std::string out = py::str(out_value).cast<std::string>();
      runner::check_folder_argument("out", out);
      config.output.dir = out;
    }
    run_dir = config.output.dir;
  }
  std::atomic<bool> stop{false};
  PythonObserver observer(progress, &stop);
  runner::TrainedRun trained;
  {
    py::gil_scoped_release release;
    std::unique_ptr<io::RunLock> lock;
    if (resume) {
      runner::ResumedRun resumed = runner::prepare_resume({run_dir, "", sets, "config"});
      config = std::move(resumed.config);
      lock = std::move(resumed.lock);
    } else {
      lock = runner::prepare_new_run_folder(run_dir, overwrite, {"resume=True", "out=DIR", "overwrite=True"});
    }
    trained = runner::train_with_study(config, run_dir, resume, &stop, {&observer});
  }
  if (observer.error()) throw std::move(*observer.error());
  if (observer.interrupted()) {
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    ("interrupted at step " + std::to_string(trained.result.step) +
                     ": checkpoint saved; continue with: attograd train --resume " + run_dir)
                        .c_str());
    throw py::error_already_set();
  }
  return py::module_::import("attograd").attr("load_run")(run_dir);
}

}  // namespace

train::Config read_config(py::handle config, const std::vector<std::string>& sets) {
  if (py::isinstance<py::str>(config) ||
      py::isinstance(config, py::module_::import("pathlib").attr("PurePath"))) {
    const std::string path = py::str(config).cast<std::string>();
    try {
      return train::load_config(path, sets);
    } catch (const std::exception& e) {
      if (!std::filesystem::exists(path)) throw FileNotFound(e.what());
      throw;
    }
  }
  if (!py::isinstance<py::dict>(config))
    throw std::invalid_argument("config: expected a dict or a path, got " + type_name(config));
  nlohmann::json document;
  try {
    document = python_to_json(config, "config");
  } catch (const io::JsonError& e) {
    throw train::ConfigError(e.what());  // what the command line says of such a config file
  }
  return train::from_json(document, "config", sets);
}

void bind_train(py::module_& m) {
  m.def("train", &train_run, py::arg("config"), py::arg("out") = py::none(), py::arg("overwrite") = false,
        py::arg("progress") = py::none(), py::arg("set") = std::vector<std::string>{},
        py::arg("resume") = false,
        "Trains a config (a dict, or a path to a JSON file) into a run folder, as `attograd train` does, "
        "and returns it opened (a Run). progress(record) is called with each metrics.jsonl record; set "
        "takes --set overrides ['train.steps=100']. With resume=True, config is a run folder, continued "
        "from its checkpoint as `attograd train --resume RUN` does (set may change train.steps). Ctrl-C "
        "checkpoints and raises KeyboardInterrupt.");
  m.def(
      "run_state",
      [](py::handle path) {
        const std::string dir = resume_folder(path, "path");
        findings::RunState state;
        {
          py::gil_scoped_release release;
          state = runner::run_state(dir);
        }
        return json_to_python(findings::run_state_to_json(state));
      },
      py::arg("path"),
      "The state of a run folder, as the sweep and resume decide it: a dict {path, state, step, steps, "
      "owner, "
      "stale_owner, holder_pid}; state is new, partial (resume continues it), finished, owned (a queued or "
      "running Slurm task trains it) or busy (another process writes it).");
}

}  // namespace pyag
