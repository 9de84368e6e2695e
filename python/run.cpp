// attograd.load_run(path) -> Run: a trained run folder, as the study commands open it (train::load_run),
// with forward passes, hooks as Python functions and activation caches; the study tools (patching,
// circuits, head scores, ablation, evaluation, ...) are bound from study/tools.h by python/tools.cpp.
// Arrays come out as float32 numpy arrays in the hook points' shapes (docs/architecture.md "Hook points");
// dicts are shaped like the command line's JSON.
#include "python/run.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <tuple>

#include "autograd/threads.h"
#include "nn/hooks.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "study/tool.h"
#include "train/run_folder.h"
#include "train/token_input.h"

namespace pyag {

namespace {

using Model = nn::CausalLM<float>;

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

}  // namespace

void bind_run(py::module_& m) {
  py::class_<Run> run_class(m, "Run", "A trained run folder: attograd.load_run(path).");
  run_class.def_property_readonly("path", &Run::path, "The run folder.")
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
            for (int32_t id : token_ids(ids, "ids", static_cast<int>(run->model->shape.vocab),
                                        run->config.model.max_len, &B, &T))
              names.push_back(study::token_label(*run, id));  // "<id N>" past the task's vocabulary
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
          "Every parameter under its PyTorch state_dict name, as read-only float32 arrays.");
  bind_tools(m, run_class);
  run_class.def("close", &Run::close, "Frees the model; later calls raise RuntimeError.")
      .def("__enter__", [](Run& r) -> Run& { return r; })
      .def("__exit__", [](Run& r, py::args) { r.close(); })
      .def("__repr__", [](const Run& r) { return "<attograd.Run " + r.path() + ">"; });
  m.def(
      "load_run", [](const std::string& path) { return Run(path); }, py::arg("path"),
      "Opens a run folder (from attograd train or attograd.train).");
}

}  // namespace pyag
