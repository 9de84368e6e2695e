// attograd.load_run(path) -> Run: a trained run folder, as the study commands open it (train::load_run),
// with forward passes, hooks as Python functions and activation caches; the study tools (patching,
// circuits, head scores, ablation, evaluation, ...) are bound from study/tools.h by python/tools.cpp.
// Arrays come out as float32 numpy arrays in the hook points' shapes (docs/architecture.md "Hook points");
// dicts are shaped like the command line's JSON.
#include "python/run.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <tuple>

#include "analysis/patching.h"
#include "analysis/tool.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "nn/hook_points.h"
#include "nn/hooks.h"
#include "nn/model_copy.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "train/run_folder.h"
#include "train/token_input.h"
#include "train/tokenizer.h"

namespace pyag {

// A batch as {"ids", "targets", "scored", "is_padding"}, each a (B, T) array.
py::dict batch_dict(const train::Batch& batch) {
  const std::vector<py::ssize_t> shape = {batch.B, batch.T};
  py::array_t<int32_t> ids(shape), targets(shape);
  py::array_t<bool> scored(shape), padding(shape);
  for (size_t i = 0; i < batch.inputs.size(); ++i) {
    ids.mutable_data()[i] = batch.inputs[i];
    targets.mutable_data()[i] = batch.targets[i];
    scored.mutable_data()[i] = batch.targets[i] >= 0;
    padding.mutable_data()[i] = !batch.is_padding.empty() && batch.is_padding[i];
  }
  py::dict out;
  out["ids"] = ids;
  out["targets"] = targets;
  out["scored"] = scored;
  out["is_padding"] = padding;
  return out;
}

namespace {

using Model = nn::CausalLM<float>;

// The model's hook points picked by a names filter: None (every one), a point name, a list of names, or a
// function of a name returning whether to pick it (TransformerLens's names_filter). Names are checked by
// the forward (ValueError naming an unknown one).
template <typename T>
std::vector<std::string> filter_points(const nn::CausalLM<T>& model, py::handle filter,
                                       const std::string& argument) {
  if (filter.is_none()) return model.hook_points();
  if (py::isinstance<py::str>(filter)) return {filter.cast<std::string>()};
  std::vector<std::string> out;
  if (py::isinstance<py::list>(filter) || py::isinstance<py::tuple>(filter)) {
    for (py::handle name : filter) {
      if (!py::isinstance<py::str>(name))
        throw py::type_error(argument + "[" + std::to_string(out.size()) +
                             "]: expected a point name (str), got " + type_name(name));
      out.push_back(name.cast<std::string>());
    }
    return out;
  }
  if (!PyCallable_Check(filter.ptr()))
    throw py::type_error(argument +
                         ": expected None, a point name, a list of names or a function "
                         "fn(name) -> bool, got " +
                         type_name(filter));
  // Every point, those computed on request (attn.result) too.
  for (const std::string& name : nn::hook_point_names(model.shape, true))
    if (py::bool_(filter(name))) out.push_back(name);
  return out;
}

// hooks as a dict {point: fn} or a list of (point name or names filter, fn) pairs (TransformerLens's
// fwd_hooks and bwd_hooks), as (point, fn) pairs in order, each filter expanded to the points it picks.
// `argument` names the argument in errors ("hooks", "bwd_hooks").
template <typename T>
std::vector<std::pair<std::string, py::object>> hook_pairs(const nn::CausalLM<T>& model,
                                                           py::handle hooks_value,
                                                           const std::string& argument) {
  std::vector<std::pair<py::object, py::object>> pairs;
  if (py::isinstance<py::dict>(hooks_value)) {
    for (const auto& [key, fn] : py::reinterpret_borrow<py::dict>(hooks_value)) {
      if (!py::isinstance<py::str>(key))
        throw std::invalid_argument(argument + ": expected point names as keys, got " + type_name(key));
      pairs.emplace_back(py::reinterpret_borrow<py::object>(key), py::reinterpret_borrow<py::object>(fn));
    }
  } else if (py::isinstance<py::list>(hooks_value) || py::isinstance<py::tuple>(hooks_value)) {
    for (py::handle pair : hooks_value) {
      const std::string where = argument + "[" + std::to_string(pairs.size()) + "]";
      if (!(py::isinstance<py::tuple>(pair) || py::isinstance<py::list>(pair)) || py::len(pair) != 2)
        throw std::invalid_argument(where + ": expected a pair (point name or filter, fn), got " +
                                    type_name(pair));
      pairs.emplace_back(py::reinterpret_borrow<py::object>(pair[py::int_(0)]),
                         py::reinterpret_borrow<py::object>(pair[py::int_(1)]));
    }
  } else {
    throw std::invalid_argument(argument +
                                ": expected a dict {point: fn} or a list of (point, fn) pairs, got " +
                                type_name(hooks_value));
  }
  std::vector<std::pair<std::string, py::object>> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [key, f] = pairs[i];
    const std::string where = py::isinstance<py::str>(key) ? argument + "[" + key.cast<std::string>() + "]"
                                                           : argument + "[" + std::to_string(i) + "]";
    if (!PyCallable_Check(f.ptr()))
      throw std::invalid_argument(where + ": expected a function fn(value, hook)");
    for (const std::string& point : filter_points(model, key, where)) out.emplace_back(point, f);
  }
  return out;
}

// Forward hooks (hook_pairs of `hooks`) added to `hooks` in order. Each fn(value, hook) gets a writable
// copy of the value and the point as an attograd.HookPoint (a str with .name); it returns None (the copy
// flows on, with what the hook wrote into it: `z[:, :, h] = 0`) or an array of the value's shape and dtype
// (numpy's, or one with __array__: a torch tensor). A copy left unchanged lets the value itself flow on.
template <typename T>
void add_hooks(nn::Hooks<T>& hooks, const nn::CausalLM<T>& model, py::handle hooks_value) {
  const py::object hook_point = py::module_::import("attograd").attr("HookPoint");
  for (const auto& [point, f] : hook_pairs(model, hooks_value, "hooks")) {
    const py::object name = hook_point(point);
    hooks.add(point, [f = f, name, point = point](const ag::Tensor<T>& value) -> ag::Tensor<T> {
      py::gil_scoped_acquire gil;
      const std::vector<T> before = value.to_vector();
      const ag::Tensor<T> copy = ag::Tensor<T>::from(value.shape(), before);
      const py::object out = f(tensor_view(copy, true), name);
      if (!out.is_none()) return tensor_from_array<T>(out, "hooks[" + point + "] returned", &value.shape());
      if (std::memcmp(before.data(), copy.data(), before.size() * sizeof(T)) == 0) return value;
      return copy;
    });
  }
}

// "float32" or "float64", the dtype of a forward or backward; true for float64.
bool is_float64(py::handle dtype) {
  std::string name;
  if (py::isinstance<py::str>(dtype))
    name = dtype.cast<std::string>();
  else if (py::hasattr(dtype, "__name__") || py::isinstance<py::dtype>(dtype))
    name = py::str(py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype))).cast<std::string>();
  else
    throw py::type_error("dtype: expected \"float32\" or \"float64\", got " + type_name(dtype));
  if (name != "float32" && name != "float64")
    throw std::invalid_argument("dtype: expected \"float32\" or \"float64\", got '" + name + "'");
  return name == "float64";
}

// Logits of ids through the fused training forward (no hooks) or the reference forward with `hooks`.
template <typename T>
ag::Tensor<T> run_forward(const nn::CausalLM<T>& model, const std::vector<int32_t>& ids, int64_t B,
                          int64_t T_, nn::Hooks<T>* hooks) {
  py::gil_scoped_release release;
  ag::NoGradScope no_grad;
  return hooks ? model.forward(ids, B, T_, {}, hooks) : model.forward(ids, B, T_);
}

// TransformerLens's return_type: the logits, the next-token loss (the mean over every position but the
// last, or (B, T - 1) per token), both as (logits, loss), or None.
template <typename F>
py::object shaped_result(const ag::Tensor<F>& logits, const std::vector<int32_t>& ids, int64_t B, int64_t T,
                         py::handle return_type, bool loss_per_token) {
  std::string kind = "none";
  if (!return_type.is_none()) {
    if (!py::isinstance<py::str>(return_type))
      throw py::type_error("return_type: expected \"logits\", \"loss\", \"both\" or None, got " +
                           type_name(return_type));
    kind = return_type.cast<std::string>();
    if (kind != "logits" && kind != "loss" && kind != "both")
      throw std::invalid_argument("return_type: expected \"logits\", \"loss\", \"both\" or None, got '" +
                                  kind + "'");
  }
  if (kind == "none") return py::none();
  if (kind == "logits") return tensor_view(logits, true);
  if (T < 2)
    throw std::invalid_argument("return_type " + kind +
                                ": the next-token loss needs at least 2 tokens, got " + std::to_string(T));
  ag::Tensor<F> logp;
  {
    ag::NoGradScope no_grad;
    logp = ag::log_softmax(logits);
  }
  const int64_t V = logits.size(-1);
  ag::Tensor<F> per = ag::Tensor<F>::empty({B, T - 1});
  double total = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t + 1 < T; ++t) {
      const F l = -logp.data()[(b * T + t) * V + ids[b * T + t + 1]];
      per.data()[b * (T - 1) + t] = l;
      total += l;
    }
  const py::object loss = loss_per_token ? py::object(tensor_view(per, true))
                                         : py::object(py::float_(total / static_cast<double>(B * (T - 1))));
  if (kind == "loss") return loss;
  return py::make_tuple(tensor_view(logits, true), loss);
}

// A forward in F (float or double) with forward hooks and, when bwd_hooks is given, the backward of the
// loss (or of sum(grad_logits * logits)) through analysis::point_gradients, each backward hook called with
// the gradient at its point, in backward order (the reverse of the forward's).
template <typename F>
py::object forward_as(const nn::CausalLM<F>& model, const std::vector<int32_t>& ids, int64_t B, int64_t T,
                      py::handle hooks_value, py::handle bwd_value, py::handle grad_logits,
                      py::handle return_type, bool loss_per_token) {
  nn::Hooks<F> hooks;
  if (!hooks_value.is_none()) add_hooks(hooks, model, hooks_value);
  if (bwd_value.is_none()) {
    if (!grad_logits.is_none())
      throw std::invalid_argument("grad_logits: the seed of a backward, given without bwd_hooks");
    const ag::Tensor<F> logits = run_forward(model, ids, B, T, hooks.empty() ? nullptr : &hooks);
    return shaped_result(logits, ids, B, T, return_type, loss_per_token);
  }
  std::vector<std::pair<std::string, py::object>> pairs = hook_pairs(model, bwd_value, "bwd_hooks");
  const std::vector<std::string> order = nn::hook_point_names(model.shape, true);
  auto rank = [&](const std::string& p) { return std::find(order.begin(), order.end(), p) - order.begin(); };
  std::stable_sort(pairs.begin(), pairs.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) > rank(b.first); });
  std::vector<std::string> points;
  for (const auto& [p, f] : pairs)
    if (std::find(points.begin(), points.end(), p) == points.end()) points.push_back(p);
  std::vector<F> seed;
  if (!grad_logits.is_none()) {
    const std::vector<int64_t> shape = {B, T, model.shape.vocab};
    py::object grad = py::reinterpret_borrow<py::object>(grad_logits);
    if (py::isinstance<py::array>(grad) && py::reinterpret_borrow<py::array>(grad).dtype().kind() == 'f')
      grad = grad.attr("astype")(sizeof(F) == 4 ? "float32" : "float64");
    seed = tensor_from_array<F>(grad, "grad_logits", &shape).to_vector();
  } else {
    const bool loss = py::isinstance<py::str>(return_type) && (return_type.cast<std::string>() == "loss" ||
                                                               return_type.cast<std::string>() == "both");
    if (!loss)
      throw std::invalid_argument(
          "bwd_hooks: the backward starts from the loss (return_type \"loss\" or \"both\") or from "
          "grad_logits "
          "(d metric / d logits, the logits' shape); neither was given");
  }
  analysis::PointGradients<F> out;
  {
    py::gil_scoped_release release;
    out = analysis::point_gradients(model, ids, B, T, seed, points, &hooks);
  }
  const py::object hook_point = py::module_::import("attograd").attr("HookPoint");
  for (const auto& [p, f] : pairs) {
    const py::object returned = f(tensor_view(out.gradients.at(p), false), hook_point(p));
    if (!returned.is_none())
      throw std::invalid_argument("bwd_hooks[" + p +
                                  "] returned a value: backward hooks read the gradient (return None)");
  }
  return shaped_result(out.logits, ids, B, T, return_type, loss_per_token);
}

py::object forward(const Run& self, py::handle ids_value, py::object hooks_value, py::object return_type,
                   bool loss_per_token, py::object bwd_hooks, py::object grad_logits, py::object dtype) {
  const auto run = self.get();
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids = self.ids(*run, ids_value, "ids", &B, &T);
  if (is_float64(dtype))
    return forward_as(*nn::float64_copy(*run->model), ids, B, T, hooks_value, bwd_hooks, grad_logits,
                      return_type, loss_per_token);
  return forward_as(*run->model, ids, B, T, hooks_value, bwd_hooks, grad_logits, return_type, loss_per_token);
}

py::tuple run_with_cache(py::object self_object, py::handle ids_value, py::object names_value,
                         py::object hooks_value, py::object return_type, bool loss_per_token) {
  const Run& self = self_object.cast<const Run&>();
  const auto run = self.get();
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids = self.ids(*run, ids_value, "ids", &B, &T);
  const std::vector<std::string> names = filter_points(*run->model, names_value, "names");
  nn::Hooks<float> hooks;
  if (!hooks_value.is_none()) add_hooks(hooks, *run->model, hooks_value);
  for (const std::string& n : names) hooks.capture(n);  // after the hooks: the cache holds what flows on
  const ag::Tensor<float> logits = run_forward(*run->model, ids, B, T, &hooks);
  py::dict values;
  for (const std::string& n : names) values[py::str(n)] = tensor_view(hooks.captured(n), true);
  const py::object cache = py::module_::import("attograd").attr("ActivationCache")(values, self_object);
  return py::make_tuple(shaped_result(logits, ids, B, T, return_type, loss_per_token), cache);
}

// d(sum(grad_logits * logits)) / d(value) at each point picked by `points`, the parameters frozen
// (analysis::point_gradients).
template <typename F>
py::dict backward_as(const nn::CausalLM<F>& model, const std::vector<int32_t>& ids, int64_t B, int64_t T,
                     py::handle grad_logits, py::object points_value) {
  const std::vector<std::string> points = filter_points(model, points_value, "points");
  const std::vector<int64_t> shape = {B, T, model.shape.vocab};
  py::object grad = py::reinterpret_borrow<py::object>(grad_logits);
  if (py::isinstance<py::array>(grad) && py::reinterpret_borrow<py::array>(grad).dtype().kind() == 'f')
    grad = grad.attr("astype")(sizeof(F) == 4 ? "float32" : "float64");  // numpy's float64 is welcome
  const ag::Tensor<F> seed = tensor_from_array<F>(grad, "grad_logits", &shape);
  analysis::PointGradients<F> out;
  {
    py::gil_scoped_release release;
    out = analysis::point_gradients(model, ids, B, T, seed.to_vector(), points);
  }
  py::dict result;
  for (const std::string& p : points) result[py::str(p)] = tensor_view(out.gradients.at(p), true);
  return result;
}

py::dict backward(const Run& self, py::handle ids_value, py::handle grad_logits, py::object points_value,
                  py::object dtype) {
  const auto run = self.get();
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids = self.ids(*run, ids_value, "ids", &B, &T);
  if (is_float64(dtype))
    return backward_as(*nn::float64_copy(*run->model), ids, B, T, grad_logits, points_value);
  return backward_as(*run->model, ids, B, T, grad_logits, points_value);
}

// The task's own sequences: `attograd eval`'s held-out set (task.eval_set with the config's seed unless
// given) or a training batch drawn from `seed` (task.sample), as (B, T) arrays.
py::dict sample(const Run& r, py::handle n_value, py::handle split_value, py::handle seed_value) {
  const auto run = r.get();
  const int64_t n = int_of(n_value, "n");
  if (n < 1) throw std::invalid_argument("n: expected at least 1 sequence, got " + std::to_string(n));
  if (n > std::numeric_limits<int>::max())
    throw std::invalid_argument("n: expected at most " + std::to_string(std::numeric_limits<int>::max()) +
                                " sequences, got " + std::to_string(n));
  (void)train::held_out_count(*run, static_cast<int>(n), "n");  // eval_size's range and memory estimate
  if (!py::isinstance<py::str>(split_value))
    throw py::type_error("split: expected \"heldout\" or \"train\", got " + type_name(split_value));
  const std::string split = split_value.cast<std::string>();
  if (split != "heldout" && split != "train")
    throw std::invalid_argument("split: expected \"heldout\" or \"train\", got '" + split + "'");
  int64_t seed = run->config.seed;
  if (!seed_value.is_none()) {
    seed = int_of(seed_value, "seed");
    if (seed < 0)
      throw std::invalid_argument("seed: expected a non-negative int, got " + std::to_string(seed));
  }
  train::Batch batch;
  {
    py::gil_scoped_release release;
    if (split == "heldout") {
      batch = run->task->eval_set(static_cast<uint64_t>(seed), static_cast<int>(n));
    } else {
      ag::Rng rng(static_cast<uint64_t>(seed));
      batch = run->task->sample(rng, static_cast<int>(n));
    }
  }
  return batch_dict(batch);
}

// The text of ids: the tokenizer's decoding when the run reads text through one (bytes that are no UTF-8
// as U+FFFD, as Hugging Face's decode), else the token names (analysis::token_label) joined by spaces.
py::str ids_string(const analysis::StudyRun& run, const std::vector<int32_t>& ids) {
  const int vocab = run.task->vocab_size();
  if (run.task->tokenizer() &&
      std::all_of(ids.begin(), ids.end(), [&](int32_t id) { return id >= 0 && id < vocab; })) {
    const std::string bytes = run.task->decode(ids);
    PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
    if (!text) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(text);
  }
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + analysis::token_label(run, id);
  return py::str(out);
}

// A token as Python shows it: the text it stands for when the run reads text through a tokenizer (" the",
// as TransformerLens's to_str_tokens; a token that is part of a UTF-8 character shows U+FFFD for it), else
// its name (analysis::token_label: "BOS", "3", "<id N>" past the task's vocabulary).
py::str token_string(const analysis::StudyRun& run, int id) {
  return ids_string(run, {id});
}

// Ids to token strings (token_string): an int, shape (T,) or (B, T) (nested lists), any id of the
// vocabulary whatever max_len.
py::object token_names(const Run& r, py::handle ids_value) {
  const auto run = r.get();
  const int vocab = static_cast<int>(run->model->shape.vocab);  // ids past the task's are "<id N>"
  if (py::isinstance<py::int_>(ids_value) && !py::isinstance<py::bool_>(ids_value)) {
    int64_t B = 0, T = 0;
    const std::vector<int32_t> id =
        token_ids(py::make_tuple(ids_value), "ids", vocab, std::numeric_limits<int>::max(), &B, &T);
    return token_string(*run, id[0]);
  }
  int64_t B = 0, T = 0;
  const std::vector<int32_t> ids =
      token_ids(ids_value, "ids", vocab, std::numeric_limits<int>::max(), &B, &T);
  const py::object shaped =
      array_like(ids_value) ? py::object(as_array(ids_value)) : py::reinterpret_borrow<py::object>(ids_value);
  const bool batched = py::len(py::module_::import("numpy").attr("shape")(shaped)) == 2;
  py::list out;
  for (int64_t b = 0; b < B; ++b) {
    py::list row;
    for (int64_t t = 0; t < T; ++t) row.append(token_string(*run, ids[b * T + t]));
    if (!batched) return std::move(row);
    out.append(row);
  }
  return std::move(out);
}

// The BOS rule of every front end: text and token names get BOS put in front when missing
// (train::input_from_names), ids are taken as given. A task with a tokenizer (text with unit bpe,
// pretrained) encodes the text itself; the other kinds read token names. A list of texts is a batch; each
// must come to the same length.
py::array to_tokens(const Run& r, py::handle text, bool prepend_bos) {
  const auto run = r.get();
  std::vector<std::string> texts;
  if (py::isinstance<py::str>(text)) {
    texts.push_back(text.cast<std::string>());
  } else if (py::isinstance<py::list>(text) || py::isinstance<py::tuple>(text)) {
    for (py::handle t : text) {
      if (!py::isinstance<py::str>(t))
        throw py::type_error("text[" + std::to_string(texts.size()) + "]: expected token names (str), got " +
                             type_name(t));
      texts.push_back(t.cast<std::string>());
    }
    if (texts.empty()) throw std::invalid_argument("text: expected at least one text, got an empty list");
  } else {
    throw py::type_error("text: expected token names (a str or a list of str), got " + type_name(text));
  }
  std::vector<int32_t> all;
  size_t length = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string argument = texts.size() == 1 ? "text" : "text[" + std::to_string(i) + "]";
    std::vector<int32_t> ids;
    if (run->task->tokenizer()) {  // text with unit bpe, pretrained: the text itself
      ids = run->task->tokenizer()->encode(texts[i]);
      const std::optional<int> bos = run->task->bos_id();
      if (prepend_bos && bos && (ids.empty() || ids.front() != *bos)) ids.insert(ids.begin(), *bos);
      if (ids.empty()) throw std::invalid_argument(argument + ": the text encodes to no tokens");
      train::check_input_length(*run, ids.size(), argument);
    } else if (prepend_bos) {
      ids = train::input_from_names(*run, texts[i], argument, nullptr);
    } else {
      ids = train::parse_token_names(*run->task, texts[i], argument);
      train::check_input_length(*run, ids.size(), argument);
    }
    if (i == 0) length = ids.size();
    if (ids.size() != length)
      throw std::invalid_argument(argument + ": " + std::to_string(ids.size()) + " tokens, but text[0] has " +
                                  std::to_string(length) + " (a batch needs one length)");
    all.insert(all.end(), ids.begin(), ids.end());
  }
  py::array_t<int32_t> out({static_cast<py::ssize_t>(texts.size()), static_cast<py::ssize_t>(length)});
  std::copy(all.begin(), all.end(), out.mutable_data());
  return std::move(out);
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
          py::arg("text"), "Token names, split on white space, to ids exactly as given (shape (T,)).")
      .def("to_tokens", &to_tokens, py::arg("text"), py::arg("prepend_bos") = true,
           "Token names (a str, or a list of str of one length) to ids of shape (B, T), BOS put in front of "
           "each when missing unless prepend_bos is False.")
      .def(
          "to_str_tokens",
          [](const Run& r, py::handle input, bool prepend_bos) -> py::object {
            const bool texts = py::isinstance<py::list>(input) && py::len(input) > 0 &&
                               py::isinstance<py::str>(input[py::int_(0)]);
            if (py::isinstance<py::str>(input) || texts) {
              const py::object names = token_names(r, to_tokens(r, input, prepend_bos));
              return py::isinstance<py::str>(input) ? py::object(names[py::int_(0)]) : names;
            }
            return token_names(r, input);
          },
          py::arg("input"), py::arg("prepend_bos") = true,
          "The tokens of text (as to_tokens splits it, BOS rule included; a list of texts gives one "
          "list each) or of ids (as given): their text for a run with a tokenizer, else their names.")
      .def(
          "_decode", [](const Run& r, const std::vector<int32_t>& ids) { return ids_string(*r.get(), ids); },
          py::arg("ids"),
          "The text of ids (T,) (to_string): the tokenizer's decoding (invalid UTF-8 as U+FFFD), or the "
          "token names joined by spaces for a task without a tokenizer.")
      .def("token_names", &token_names, py::arg("ids"),
           "The tokens of ids of the vocabulary, as to_str_tokens shows them: a str for an int, a list for "
           "shape (T,), a list of lists for (B, T).")
      .def_property_readonly(
          "vocab",
          [](const Run& r) {
            const auto run = r.get();
            std::vector<std::string> names;
            for (int id = 0; id < run->task->vocab_size(); ++id) names.push_back(run->task->token_name(id));
            return names;
          },
          "Every token's name, by id.")
      .def(
          "forward", &forward, py::arg("ids"), py::arg("hooks") = py::none(),
          py::arg("return_type") = "logits", py::arg("loss_per_token") = false,
          py::arg("bwd_hooks") = py::none(), py::arg("grad_logits") = py::none(),
          py::arg("dtype") = "float32",
          "Logits (B, T, V) of ids (T,) or (B, T); hooks {point: fn(value, hook)} or [(point or filter, fn)] "
          "read (return None) or replace (return an array of the value's shape) activations; return_type "
          "\"logits\", \"loss\" (next-token), \"both\" or None; bwd_hooks {point: fn(grad, hook)} get the "
          "gradient of the loss (or of sum(grad_logits * logits)) at each point; dtype \"float64\" runs a "
          "float64 "
          "copy of the model.")
      .def("run_with_hooks", &forward, py::arg("ids"), py::arg("hooks") = py::none(),
           py::arg("return_type") = "logits", py::arg("loss_per_token") = false,
           py::arg("bwd_hooks") = py::none(), py::arg("grad_logits") = py::none(),
           py::arg("dtype") = "float32", "forward, under TransformerLens's name.")
      .def("run_with_cache", &run_with_cache, py::arg("ids"), py::arg("names") = py::none(),
           py::arg("hooks") = py::none(), py::arg("return_type") = "logits",
           py::arg("loss_per_token") = false,
           "(logits, {point: array}) with every hook point, or those names picks (a name, a list, or a "
           "function of the name); hooks as forward's, run before the cache reads each point.")
      .def("backward", &backward, py::arg("ids"), py::arg("grad_logits"), py::arg("points") = py::none(),
           py::arg("dtype") = "float32",
           "{point: gradient}: d(sum(grad_logits * logits)) / d(value at the point) for ids (T,) or (B, T) "
           "and "
           "grad_logits of the logits' shape (B, T, V), the parameters frozen; points as run_with_cache's "
           "names (None: every point of hook_points()).")
      .def("sample", &sample, py::arg("n"), py::arg("split") = "heldout", py::arg("seed") = py::none(),
           "The task's own sequences: {\"ids\": (B, T) inputs, \"targets\": (B, T) next tokens (-1 where not "
           "scored), \"scored\", \"is_padding\": (B, T) bool}. split \"heldout\" is attograd eval's held-out "
           "set (the config's seed unless seed is given); \"train\" a training batch drawn from seed.")
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
