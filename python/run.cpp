// attograd.load_run(path) -> Run: a trained run folder, as the study commands open it (train::load_run),
// with forward passes, hooks as Python functions, activation caches, patching, circuits, head scores,
// ablation and evaluation. Arrays come out as float32 numpy arrays in the hook points' shapes
// (docs/architecture.md "Hook points"); dicts are shaped like the command line's JSON.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <tuple>

#include "autograd/threads.h"
#include "findings/circuits_view.h"
#include "findings/head_scores.h"
#include "findings/patching_view.h"
#include "nn/hooks.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "study/ablation.h"
#include "study/circuits.h"
#include "study/patching.h"
#include "study/run_study.h"
#include "train/evaluate.h"
#include "train/run_folder.h"
#include "train/token_input.h"

namespace pyag {

namespace {

using Model = nn::CausalLM<float>;

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
    run_ = std::make_shared<train::LoadedRun>(train::load_run(path));
    // As the study commands: the run's thread count, at most this machine's.
    ag::set_num_threads(std::min(run_->config.train.threads, train::max_threads()));
    path_ = path;
  }

  // The open run, shared so that close() during another thread's call leaves that call its run.
  std::shared_ptr<train::LoadedRun> get() const {
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
  int token(const train::LoadedRun& run, py::handle value, const std::string& argument) const {
    if (py::isinstance<py::str>(value)) {
      const std::string name = value.cast<std::string>();
      const std::optional<int> id = run.task->token_id(name);
      if (!id) throw std::invalid_argument(argument + ": unknown token '" + name + "'");
      return *id;
    }
    if (!py::isinstance<py::int_>(value))
      throw std::invalid_argument(argument + ": expected a token name or id");
    const int64_t id = value.cast<int64_t>();
    if (id < 0 || id >= run.task->vocab_size())
      throw std::invalid_argument(argument + ": token id " + std::to_string(id) +
                                  " is outside the vocabulary 0.." +
                                  std::to_string(run.task->vocab_size() - 1));
    return static_cast<int>(id);
  }

 private:
  std::shared_ptr<train::LoadedRun> run_;
  std::string path_;
};

py::array forward(const Run& self, py::handle ids_value, py::object hooks_value) {
  const auto run = self.get();
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids = self.ids(*run, ids_value, "ids", &B, &T);
  ag::Tensor<float> logits;
  if (hooks_value.is_none()) {
    {
      py::gil_scoped_release release;
      ag::NoGradScope no_grad;
      logits = run->model->forward(ids, B, T);  // the training forward: fused, no hook points
    }
    return tensor_view(logits, true);
  }
  if (!py::isinstance<py::dict>(hooks_value))
    throw std::invalid_argument("hooks: expected a dict {point: fn}, got " +
                                py::str(py::type::of(hooks_value).attr("__name__")).cast<std::string>());
  nn::Hooks<float> hooks;
  for (const auto& [key, fn] : py::reinterpret_borrow<py::dict>(hooks_value)) {
    if (!py::isinstance<py::str>(key)) throw std::invalid_argument("hooks: expected point names as keys");
    if (!PyCallable_Check(fn.ptr()))
      throw std::invalid_argument("hooks[" + key.cast<std::string>() +
                                  "]: expected a function fn(value, point)");
    const std::string point = key.cast<std::string>();
    py::object f = py::reinterpret_borrow<py::object>(fn);
    hooks.add(point, [f, point](const ag::Tensor<float>& value) -> ag::Tensor<float> {
      py::gil_scoped_acquire gil;
      const py::object out = f(tensor_view(value, false), point);
      if (out.is_none()) return value;
      return tensor_from_array<float>(out, "hooks[" + point + "] returned", &value.shape());
    });
  }
  {
    py::gil_scoped_release release;
    ag::NoGradScope no_grad;
    logits = run->model->forward(ids, B, T, {}, &hooks);  // the reference forward, with the hook points
  }
  return tensor_view(logits, true);
}

py::tuple run_with_cache(const Run& self, py::handle ids_value, py::object names_value) {
  const auto run = self.get();
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids = self.ids(*run, ids_value, "ids", &B, &T);
  const std::vector<std::string> names =
      names_value.is_none() ? run->model->hook_points() : names_value.cast<std::vector<std::string>>();
  nn::Hooks<float> hooks;
  for (const std::string& n : names) hooks.capture(n);
  ag::Tensor<float> logits;
  {
    py::gil_scoped_release release;
    ag::NoGradScope no_grad;
    logits = run->model->forward(ids, B, T, {}, &hooks);
  }
  py::dict cache;
  for (const std::string& n : names) cache[py::str(n)] = tensor_view(hooks.captured(n), true);
  return py::make_tuple(tensor_view(logits, true), cache);
}

py::object patch(const Run& self, py::handle clean_value, py::handle corrupt_value, py::object answer_value,
                 py::object wrong_value, bool attribution) {
  const auto run = self.get();
  const std::vector<int32_t> clean = self.sequence(*run, clean_value, "clean");
  const std::vector<int32_t> corrupt = self.sequence(*run, corrupt_value, "corrupt");
  if (clean.size() != corrupt.size())
    throw std::invalid_argument("clean has " + std::to_string(clean.size()) + " tokens but corrupt has " +
                                std::to_string(corrupt.size()) +
                                "; patching needs inputs of the same length");
  if (answer_value.is_none() != wrong_value.is_none())
    throw std::invalid_argument("give both answer and wrong, or neither");
  findings::PatchingResult r;
  {
    const bool given = !answer_value.is_none();
    int answer = 0, wrong = 0;
    if (given) {
      answer = self.token(*run, answer_value, "answer");
      wrong = self.token(*run, wrong_value, "wrong");
      if (answer == wrong)
        throw std::invalid_argument("answer and wrong are the same token '" + run->task->token_name(answer) +
                                    "'");
    }
    py::gil_scoped_release release;
    // By default, as the command line: answer the top prediction on clean, wrong the top one on corrupt.
    if (!given) std::tie(answer, wrong) = study::default_answer_wrong(*run->model, clean, corrupt);
    r = study::activation_patching(*run->model, clean, corrupt, answer, wrong);
    if (attribution) r.attribution = study::attribution_patching(*run->model, clean, corrupt, answer, wrong);
    for (int id : clean) r.clean_tokens.push_back(run->task->token_name(id));
    for (int id : corrupt) r.corrupt_tokens.push_back(run->task->token_name(id));
    r.answer_token = run->task->token_name(answer);
    r.wrong_token = run->task->token_name(wrong);
  }
  return json_to_python(findings::patching_to_json(r, false));
}

py::object circuits(const Run& self, bool composition) {
  const auto run = self.get();
  if (composition && run->model->blocks.size() < 2)
    throw std::invalid_argument(self.path() +
                                ": composition needs a model with at least 2 layers, this one has " +
                                std::to_string(run->model->blocks.size()) + " (composition=False)");
  findings::CircuitsResult r;
  {
    py::gil_scoped_release release;
    study::check_circuits_vocab(run->config.model.vocab, self.path());
    r = study::run_circuits(*run->model, *run->task, run->config, run->step, composition);
  }
  return json_to_python(findings::circuits_to_json(r, false));
}

py::object scores(const Run& self) {
  const auto run = self.get();
  findings::HeadScoresFile s;
  {
    py::gil_scoped_release release;
    const train::Batch score_set = run->task->eval_set(run->config.seed, run->config.train.eval_size);
    s = study::Study(*run->task, run->config, score_set).head_scores(*run->model, run->step);
  }
  return json_to_python(findings::head_scores_to_json(s));
}

py::object ablate(const Run& self, const std::string& mode_name, int n, bool per_position, int k,
                  uint64_t seed) {
  const auto run = self.get();
  const study::AblationMode mode = study::parse_ablation_mode(mode_name, "mode");
  const int count = train::held_out_count(*run, n, "n");
  if (k < 1) throw std::invalid_argument("k: expected at least 1, got " + std::to_string(k));
  nlohmann::json j;
  {
    py::gil_scoped_release release;
    const train::Batch eval_set = run->task->eval_set(run->config.seed, count);
    const study::ModeAblationReport r =
        study::ablate_heads_mode(*run->model, eval_set, mode, per_position, k, seed);
    j = study::mode_ablation_to_json(r, mode, eval_set.B, k);
  }
  return json_to_python(j);
}

py::object evaluate(const Run& self, int n) {
  const auto run = self.get();
  const int count = train::held_out_count(*run, n, "n");
  train::EvalResult r;
  {
    py::gil_scoped_release release;
    r = train::evaluate(*run->model, run->task->eval_set(run->config.seed, count));
  }
  return json_to_python({{"split", "heldout"}, {"eval_acc", r.acc}, {"eval_loss", r.loss}, {"n", r.n}});
}

}  // namespace

void bind_run(py::module_& m) {
  py::class_<Run>(m, "Run", "A trained run folder: attograd.load_run(path).")
      .def_property_readonly("path", &Run::path, "The run folder.")
      .def_property_readonly(
          "step", [](const Run& r) { return r.get()->step; }, "The checkpoint's step.")
      .def_property_readonly(
          "config", [](const Run& r) { return json_to_python(train::to_json(r.get()->config)); },
          "The resolved config, as config.json holds it (a dict).")
      .def(
          "tokens",
          [](const Run& r, const std::string& text) {
            const std::vector<int32_t> ids = train::parse_token_names(*r.get()->task, text, "text");
            return py::array_t<int32_t>(static_cast<py::ssize_t>(ids.size()), ids.data());
          },
          py::arg("text"), "Token names, split on white space, to ids (an int array of shape (T,)).")
      .def(
          "token_names",
          [](const Run& r, py::handle ids) {
            const auto run = r.get();
            int64_t B = 0, T = 0;
            std::vector<std::string> names;
            for (int32_t id :
                 token_ids(ids, "ids", run->task->vocab_size(), run->config.model.max_len, &B, &T))
              names.push_back(run->task->token_name(id));
            return names;
          },
          py::arg("ids"), "The names of token ids, in order (row-major for shape (B, T)).")
      .def("forward", &forward, py::arg("ids"), py::arg("hooks") = py::none(),
           "Logits (B, T, V) of ids (T,) or (B, T); hooks {point: fn(value, point)} read (return None) or "
           "replace (return an array of the value's shape) activations.")
      .def("run_with_cache", &run_with_cache, py::arg("ids"), py::arg("names") = py::none(),
           "(logits, {point: array}) with every hook point, or the named ones.")
      .def(
          "hook_points", [](const Run& r) { return r.get()->model->hook_points(); },
          "Every hook point of the model, in forward order.")
      .def(
          "parameters",
          [](const Run& r) {
            py::dict out;
            for (const auto& p : r.get()->model->named_parameters())
              out[py::str(p.name)] = tensor_view(*p.tensor, false);
            return out;
          },
          "Every parameter under its PyTorch state_dict name, as read-only float32 arrays.")
      .def("patch", &patch, py::arg("clean"), py::arg("corrupt"), py::arg("answer") = py::none(),
           py::arg("wrong") = py::none(), py::arg("attribution") = false,
           "Activation patching, as `attograd patch --json`.")
      .def("circuits", &circuits, py::arg("composition") = true, "The circuit analysis, as circuits.json.")
      .def("scores", &scores, "Every head's scores at the checkpoint, as scores.json's heads.")
      .def("ablate", &ablate, py::arg("mode") = "zero", py::arg("n") = 0, py::arg("per_position") = false,
           py::arg("k") = 4, py::arg("seed") = 1, "Head ablation, as `attograd ablate --mode M --json`.")
      .def("eval", &evaluate, py::arg("n") = 0, "Held-out exact match and loss, as `attograd eval --json`.")
      .def("close", &Run::close, "Frees the model; later calls raise RuntimeError.")
      .def("__enter__", [](Run& r) -> Run& { return r; })
      .def("__exit__", [](Run& r, py::args) { r.close(); })
      .def("__repr__", [](const Run& r) { return "<attograd.Run " + r.path() + ">"; });
  m.def(
      "load_run", [](const std::string& path) { return Run(path); }, py::arg("path"),
      "Opens a run folder (from attograd train or attograd.train).");
}

}  // namespace pyag
