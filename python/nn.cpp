// The engine for a model of one's own: attograd.nn's modules (the nn/ layers a config's model is built
// from), attograd.optim's optimisers (train/optimizer.h, what the trainer steps with) and attograd.Task (a
// config's task: the trainer's batches and eval's held-out set). A Python training loop built from them runs
// the trainer's code: CausalLM(config) is train::make_model's model (the same initial weights),
// forward_backward is the trainer's sharded forward and backward (train/batch_shards.h), Task.batch(step)
// draws the trainer's batches, and optim.from_config sets up the optimiser as the trainer does.
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/threads.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/transformer.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "python/run.h"
#include "train/batch_shards.h"
#include "train/model_factory.h"
#include "train/optimizer.h"
#include "train/tasks.h"
#include "train/training_step.h"

namespace pyag {

namespace {

using Tensor = ag::Tensor<float>;
using Module = nn::Module<float>;

// A Python int seed (0 .. 2^63 - 1), or the config's when None.
uint64_t seed_of(py::handle value, uint64_t fallback) {
  if (value.is_none()) return fallback;
  const int64_t seed = int_of(value, "seed");
  if (seed < 0) throw std::invalid_argument("seed: expected a non-negative int, got " + std::to_string(seed));
  return static_cast<uint64_t>(seed);
}

// A width or count argument: an int in [1, limit].
int64_t size_of(py::handle value, const std::string& argument, int64_t limit = int64_t(1) << 20) {
  const int64_t n = int_of(value, argument);
  if (n < 1 || n > limit)
    throw std::invalid_argument(argument + ": expected an int in 1.." + std::to_string(limit) + ", got " +
                                std::to_string(n));
  return n;
}

// The input of a module: a float32 Tensor whose last dim is `width`.
const Tensor& input_of(py::handle x, int64_t width, int64_t min_dims = 1) {
  if (!py::isinstance<Tensor>(x))
    throw py::type_error("x: expected an attograd.Tensor (float32), got " + type_name(x));
  const Tensor& t = x.cast<const Tensor&>();
  if (t.dim() < min_dims || t.size(-1) != width)
    throw std::invalid_argument("x: expected a tensor of " + std::to_string(min_dims) +
                                " or more dims whose last is " + std::to_string(width) + ", got shape " +
                                shape_text(t.shape()));
  return t;
}

// The model section of a config: a dict of model fields ({"d_model": 64, ...}) or a whole config (a dict
// with "model", or a path), validated as a config's model section is.
nn::ModelShape shape_of(py::handle config) {
  if (py::isinstance<py::dict>(config) && !config.contains("model") && !config.contains("task")) {
    py::dict whole;
    whole["task"] = py::dict(py::arg("kind") = "copy");
    whole["model"] = config;
    return read_config(whole, {}).model;
  }
  return read_config(config, {}).model;
}

py::list tensor_list(const Module& m) {
  py::list out;
  for (const auto& p : m.named_parameters()) out.append(py::cast(*p.tensor));
  return out;
}

py::dict tensor_dict(const Module& m) {
  py::dict out;
  for (const auto& p : m.named_parameters()) out[py::str(p.name)] = py::cast(*p.tensor);
  return out;
}

// Sets every parameter of `m` from {name: array}, each name and shape checked before any is written.
void load_state(const Module& m, py::handle state) {
  if (!py::isinstance<py::dict>(state))
    throw py::type_error("state_dict: expected a dict {name: array}, got " + type_name(state));
  const py::dict d = py::reinterpret_borrow<py::dict>(state);
  const auto params = m.named_parameters();
  std::vector<std::vector<float>> values;
  for (const auto& p : params) {
    if (!d.contains(py::str(p.name)))
      throw std::invalid_argument("state_dict: missing parameter '" + p.name + "'");
    values.push_back(
        tensor_from_array<float>(d[py::str(p.name)], "state_dict[" + p.name + "]", &p.tensor->shape())
            .to_vector());
  }
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key).cast<std::string>();
    if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.name == name; }))
      throw std::invalid_argument("state_dict: unknown parameter '" + name + "'");
  }
  for (size_t i = 0; i < params.size(); ++i) params[i].tensor->assign(values[i]);
}

// Module's methods on every bound module class.
template <typename C>
void module_methods(C& c) {
  using M = typename C::type;
  c.def(
       "parameters", [](const M& m) { return tensor_list(m); },
       "Every parameter as a Tensor (sharing the module's storage: an optimiser's step shows in it).")
      .def(
          "named_parameters", [](const M& m) { return tensor_dict(m); },
          "{name: Tensor}, the names PyTorch's state_dict uses.")
      .def(
          "state_dict",
          [](const M& m) {
            py::dict out;
            for (const auto& p : m.named_parameters())
              out[py::str(p.name)] = tensor_view(p.tensor->detach(), false).attr("copy")();
            return out;
          },
          "{name: float32 array}, a copy of every parameter.")
      .def(
          "load_state_dict", [](M& m, py::handle state) { load_state(m, state); }, py::arg("state_dict"),
          "Sets every parameter from {name: array} (each name and shape checked first).")
      .def(
          "zero_grad", [](M& m) { m.zero_grad(); }, "Clears every parameter's gradient.")
      .def_property_readonly(
          "parameter_count", [](const M& m) { return m.parameter_count(); },
          "The number of parameter values.");
}

// Token ids (B, T) and next-token targets (B, T), -1 where not scored, as the loss reads them.
struct Targets {
  std::vector<int32_t> ids, targets;
  int64_t B = 0, T = 0;
};

Targets read_targets(const nn::CausalLM<float>& model, py::handle ids_value, py::handle targets_value) {
  Targets out;
  out.ids = token_ids(ids_value, "ids", static_cast<int>(model.shape.vocab),
                      static_cast<int>(model.shape.max_len), &out.B, &out.T);
  if (!py::isinstance<py::array>(targets_value) && !py::isinstance<py::list>(targets_value) &&
      !py::isinstance<py::tuple>(targets_value))
    throw py::type_error("targets: expected an integer array of the ids' shape, got " +
                         type_name(targets_value));
  const py::array a = py::module_::import("numpy").attr("asarray")(targets_value);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error("targets: expected integer token ids (-1 where not scored), got dtype " +
                         py::str(a.dtype()).cast<std::string>());
  const std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  const std::vector<int64_t> want = py::len(py::module_::import("numpy").attr("shape")(ids_value)) == 1
                                        ? std::vector<int64_t>{out.T}
                                        : std::vector<int64_t>{out.B, out.T};
  if (shape != want)
    throw std::invalid_argument("targets: expected shape " + shape_text(want) + " (the ids'), got " +
                                shape_text(shape));
  const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  if (!c) throw py::error_already_set();
  for (py::ssize_t i = 0; i < c.size(); ++i) {
    const int64_t t = c.data()[i];
    if (kind == 'u' && static_cast<uint64_t>(t) >= static_cast<uint64_t>(model.shape.vocab))
      throw std::invalid_argument("targets: id " + std::to_string(static_cast<uint64_t>(t)) +
                                  " is outside the vocabulary 0.." + std::to_string(model.shape.vocab - 1));
    if (t < -1 || t >= model.shape.vocab)
      throw std::invalid_argument("targets: id " + std::to_string(t) + " at index " + std::to_string(i) +
                                  " is outside the vocabulary 0.." + std::to_string(model.shape.vocab - 1) +
                                  " (or -1, not scored)");
    out.targets.push_back(static_cast<int32_t>(t));
  }
  return out;
}

// attograd.nn.CausalLM: the model a config describes, with the trainer's sharded step kept per shard count.
struct PyCausalLM {
  train::Config config;
  std::shared_ptr<nn::CausalLM<float>> model;
  std::map<int, std::unique_ptr<train::BatchShards>> shards;
};

// The parameters an optimiser updates: a module (its parameters with the kinds it registered them with),
// a Tensor (a 2-D one is taken as a weight matrix, any other as a bias), or a list of them.
struct ParamSpec {
  std::string name;
  Tensor tensor;
  nn::ParamKind kind;
};

void collect_params(py::handle value, const std::string& argument, std::vector<ParamSpec>& out) {
  auto from_module = [&](const Module& m) {
    for (const auto& p : m.named_parameters()) out.push_back({p.name, *p.tensor, p.kind});
  };
  if (py::isinstance<PyCausalLM>(value)) return from_module(*value.cast<PyCausalLM&>().model);
  if (py::isinstance<Module>(value)) return from_module(value.cast<Module&>());
  if (py::isinstance<Tensor>(value)) {
    const Tensor& t = value.cast<const Tensor&>();
    out.push_back({argument, t, t.dim() == 2 ? nn::ParamKind::kWeight : nn::ParamKind::kBias});
    return;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    size_t i = 0;
    for (py::handle v : value) {
      const std::string where = argument + "[" + std::to_string(i++) + "]";
      if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v))
        throw py::type_error(where + ": expected a module or a Tensor, got " + type_name(v));
      collect_params(v, where, out);
    }
    return;
  }
  throw py::type_error(argument + ": expected a module, a Tensor (float32) or a list of them, got " +
                       type_name(value));
}

// attograd.optim.AdamW and Muon: train::AdamW over the given parameters, which keeps pointers to the
// Tensor handles held here (each shares its parameter's storage and gradient).
struct PyOptimizer {
  std::vector<Tensor> tensors;
  std::vector<train::OptimParam> params;
  std::unique_ptr<train::AdamW> adamw;
  double lr = 0, muon_lr = 0;
  bool muon = false;
};
struct PyAdamW : PyOptimizer {};
struct PyMuon : PyOptimizer {};

double finite_in(py::handle value, const std::string& argument, double lo, double hi) {
  if (!py::isinstance<py::float_>(value) &&
      !(py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)))
    throw py::type_error(argument + ": expected a number, got " + type_name(value));
  const double x = value.cast<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw std::invalid_argument(
        argument + ": expected a finite number in [" + py::str(py::float_(lo)).cast<std::string>() + ", " +
        py::str(py::float_(hi)).cast<std::string>() + "], got " + py::str(value).cast<std::string>());
  return x;
}

template <typename O>
std::unique_ptr<O> make_optimizer(py::handle params_value, double lr, py::handle betas_value, double eps,
                                  double weight_decay, const std::string& decay, bool muon, double muon_lr) {
  if (decay != "weights" && decay != "all")
    throw std::invalid_argument("decay: expected \"weights\" or \"all\", got '" + decay + "'");
  if (!py::isinstance<py::tuple>(betas_value) && !py::isinstance<py::list>(betas_value))
    throw py::type_error("betas: expected a pair of numbers, got " + type_name(betas_value));
  if (py::len(betas_value) != 2)
    throw std::invalid_argument("betas: expected a pair of numbers, got " +
                                std::to_string(py::len(betas_value)));
  const double beta1 = finite_in(betas_value[py::int_(0)], "betas[0]", 0, 0.999999);
  const double beta2 = finite_in(betas_value[py::int_(1)], "betas[1]", 0, 0.999999);
  std::vector<ParamSpec> specs;
  collect_params(params_value, "params", specs);
  if (specs.empty()) throw std::invalid_argument("params: expected at least one parameter, got none");
  auto out = std::make_unique<O>();
  out->tensors.reserve(specs.size());
  for (const ParamSpec& s : specs) {
    if (!s.tensor.requires_grad())
      throw std::invalid_argument("params: " + s.name +
                                  " does not require grad (make it with requires_grad=True)");
    out->tensors.push_back(s.tensor);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    out->params.push_back(
        {specs[i].name, &out->tensors[i], train::uses_weight_decay(specs[i].kind, decay),
         muon && train::is_muon_matrix(specs[i].name, specs[i].kind, specs[i].tensor.dim())});
  out->adamw = std::make_unique<train::AdamW>(out->params, weight_decay, beta1, beta2, eps);
  out->lr = lr;
  out->muon_lr = muon_lr;
  out->muon = muon;
  return out;
}

// Batch -> {"ids", "targets", "scored", "is_padding"}, as run.sample gives it.
py::dict batch_of(const train::Batch& batch) {
  return batch_dict(batch);
}

struct PyTask {
  train::Config config;
  std::shared_ptr<train::Task> task;
  ag::Rng rng;
  int64_t next_step = 0;
};

// attograd.nn's Module and the layers: Linear, LayerNorm, MultiHeadAttention, TransformerBlock.
void bind_modules(py::module_& nnm) {
  py::class_<Module, std::shared_ptr<Module>> module_class(nnm, "Module",
                                                           "The base of attograd.nn's modules.");
  module_methods(module_class);

  py::class_<nn::Linear<float>, Module, std::shared_ptr<nn::Linear<float>>> linear(
      nnm, "Linear", "y = x W^T + b: nn.Linear(in_features, out_features, bias=True, seed=0).");
  linear
      .def(py::init([](py::handle in, py::handle out, bool bias, py::handle seed) {
             ag::Rng rng(seed_of(seed, 0));
             return std::make_shared<nn::Linear<float>>(size_of(in, "in_features"),
                                                        size_of(out, "out_features"), rng, bias);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::arg("seed") = 0)
      .def(
          "__call__",
          [](const nn::Linear<float>& l, py::handle x) { return l.forward(input_of(x, l.weight.size(1))); },
          py::arg("x"), "x (..., in_features) -> (..., out_features).")
      .def_property_readonly("weight", [](const nn::Linear<float>& l) { return l.weight; })
      .def_property_readonly("bias", [](const nn::Linear<float>& l) -> py::object {
        return l.bias.defined() ? py::cast(l.bias) : py::none();
      });

  py::class_<nn::LayerNorm<float>, Module, std::shared_ptr<nn::LayerNorm<float>>> layer_norm(
      nnm, "LayerNorm",
      "(x - mean) / sqrt(var + eps) * weight + bias over the last dim: nn.LayerNorm(dim, eps).");
  layer_norm
      .def(py::init([](py::handle dim, py::handle eps) {
             return std::make_shared<nn::LayerNorm<float>>(
                 size_of(dim, "dim"), static_cast<float>(finite_in(eps, "eps", 1e-12, 1)));
           }),
           py::arg("dim"), py::arg("eps") = 1e-5)
      .def(
          "__call__",
          [](const nn::LayerNorm<float>& n, py::handle x) {
            return n.forward_fused(input_of(x, n.weight.size(0)));
          },
          py::arg("x"), "x (..., dim) -> (..., dim), one fused op.")
      .def_property_readonly("weight", [](const nn::LayerNorm<float>& n) { return n.weight; })
      .def_property_readonly("bias", [](const nn::LayerNorm<float>& n) { return n.bias; });

  py::class_<nn::MultiHeadAttention<float>, Module, std::shared_ptr<nn::MultiHeadAttention<float>>> mha(
      nnm, "MultiHeadAttention",
      "Multi-head self-attention with Wq, Wk, Wv, Wo: MultiHeadAttention(d_model, n_heads, bias=True, "
      "seed=0).");
  mha.def(py::init([](py::handle d_model, py::handle n_heads, bool bias, py::handle seed) {
            const int64_t d = size_of(d_model, "d_model"), h = size_of(n_heads, "n_heads", d);
            if (d % h != 0)
              throw std::invalid_argument("n_heads: expected a divisor of d_model " + std::to_string(d) +
                                          ", got " + std::to_string(h));
            ag::Rng rng(seed_of(seed, 0));
            return std::make_shared<nn::MultiHeadAttention<float>>(d, h, rng, bias);
          }),
          py::arg("d_model"), py::arg("n_heads"), py::arg("bias") = true, py::arg("seed") = 0)
      .def(
          "__call__",
          [](const nn::MultiHeadAttention<float>& a, py::handle x, bool causal) {
            const Tensor& t = input_of(x, a.d_model, 3);
            if (t.dim() != 3)
              throw std::invalid_argument("x: expected shape (B, T, " + std::to_string(a.d_model) +
                                          "), got " + shape_text(t.shape()));
            return a.forward(t, causal ? nn::causal_mask<float>(t.size(1)) : Tensor());
          },
          py::arg("x"), py::arg("causal") = true,
          "x (B, T, d_model) -> (B, T, d_model); causal: query t reads keys <= t.")
      .def_readonly("n_heads", &nn::MultiHeadAttention<float>::n_heads)
      .def_readonly("d_head", &nn::MultiHeadAttention<float>::dk);

  py::class_<nn::TransformerBlock<float>, Module, std::shared_ptr<nn::TransformerBlock<float>>> block(
      nnm, "TransformerBlock",
      "A pre-norm block of a model of a config's shape: TransformerBlock(model, seed=0), model a dict of "
      "model fields ({\"d_model\": 64, \"n_heads\": 2, \"d_ff\": 256}) or a whole config.");
  block
      .def(py::init([](py::handle model, py::handle seed) {
             const nn::ModelShape shape = shape_of(model);
             ag::Rng rng(seed_of(seed, 0));
             return std::make_shared<nn::TransformerBlock<float>>(shape, rng);
           }),
           py::arg("model"), py::arg("seed") = 0)
      .def(
          "__call__",
          [](const nn::TransformerBlock<float>& b, py::handle x) {
            const Tensor& t = input_of(x, b.attn.d_model, 3);
            if (t.dim() != 3)
              throw std::invalid_argument("x: expected shape (B, T, " + std::to_string(b.attn.d_model) +
                                          "), got " + shape_text(t.shape()));
            return b.forward(t, nn::causal_mask<float>(t.size(1)));
          },
          py::arg("x"), "x (B, T, d_model) -> (B, T, d_model), causal.");
}

// attograd.nn.CausalLM: the model a config describes.
void bind_causal_lm(py::module_& nnm) {
  py::class_<PyCausalLM> lm(
      nnm, "CausalLM",
      "The model a config describes, with the trainer's initial weights: CausalLM(config, "
      "seed=None) (config a dict or a path, as attograd.train takes; seed overrides its seed).");
  lm.def(py::init([](py::handle config, py::handle seed) {
           auto out = std::make_unique<PyCausalLM>();
           out->config = read_config(config, {});
           out->config.seed = seed_of(seed, out->config.seed);
           out->model = std::shared_ptr<nn::CausalLM<float>>(train::make_model<float>(out->config));
           ag::set_num_threads(std::min(out->config.train.threads, train::max_threads()));
           return out;
         }),
         py::arg("config"), py::arg("seed") = py::none())
      .def(
          "__call__",
          [](const PyCausalLM& s, py::handle ids_value) {
            int64_t B = 0, T = 0;
            const std::vector<int32_t> ids =
                token_ids(ids_value, "ids", static_cast<int>(s.model->shape.vocab),
                          static_cast<int>(s.model->shape.max_len), &B, &T);
            py::gil_scoped_release release;
            return s.model->forward(ids, B, T);
          },
          py::arg("ids"),
          "Logits (B, T, V) of ids (T,) or (B, T) as a Tensor, through the fused training forward.")
      .def(
          "loss",
          [](const PyCausalLM& s, py::handle ids_value, py::handle targets_value) {
            const Targets t = read_targets(*s.model, ids_value, targets_value);
            py::gil_scoped_release release;
            return ag::cross_entropy(s.model->forward(t.ids, t.B, t.T), t.targets, -1);
          },
          py::arg("ids"), py::arg("targets"),
          "The mean cross-entropy of targets (the ids' shape, -1 where not scored) as a one-element Tensor: "
          "call backward() on it.")
      .def(
          "forward_backward",
          [](PyCausalLM& s, py::handle ids_value, py::handle targets_value, py::handle shards_value) {
            const Targets t = read_targets(*s.model, ids_value, targets_value);
            const int shards = shards_value.is_none()
                                   ? std::min<int>(s.config.train.shards, static_cast<int>(t.B))
                                   : static_cast<int>(size_of(shards_value, "shards", t.B));
            auto& slot = s.shards[shards];
            if (!slot)
              slot = std::make_unique<train::BatchShards>(*s.model, shards, s.config.train.scored_rows_only);
            train::Batch batch;
            batch.B = static_cast<int>(t.B);
            batch.T = static_cast<int>(t.T);
            batch.inputs = t.ids;
            batch.targets = t.targets;
            py::gil_scoped_release release;
            return slot->forward_backward(batch);
          },
          py::arg("ids"), py::arg("targets"), py::arg("shards") = py::none(),
          "The trainer's forward and backward: clears the gradients, runs loss(ids, targets) and its "
          "backward "
          "on `shards` copies of the model at once (None: the config's train.shards), leaves the gradients "
          "in "
          "the parameters and returns the loss (a float).")
      .def("parameters", [](const PyCausalLM& s) { return tensor_list(*s.model); })
      .def("named_parameters", [](const PyCausalLM& s) { return tensor_dict(*s.model); })
      .def("zero_grad", [](PyCausalLM& s) { s.model->zero_grad(); })
      .def(
          "load_state_dict", [](PyCausalLM& s, py::handle state) { load_state(*s.model, state); },
          py::arg("state_dict"),
          "Sets every parameter from {name: array} (each name and shape checked first).")
      .def_property_readonly("parameter_count",
                             [](const PyCausalLM& s) { return s.model->parameter_count(); })
      .def_property_readonly("config",
                             [](const PyCausalLM& s) { return json_to_python(train::to_json(s.config)); })
      .def(
          "state_dict",
          [](const PyCausalLM& s) {
            py::dict out;
            for (const auto& p : s.model->named_parameters())
              out[py::str(p.name)] = tensor_view(p.tensor->detach(), false).attr("copy")();
            return out;
          },
          "{name: float32 array}, a copy of every parameter (the names run.parameters() uses).")
      .def_property_readonly(
          "blocks",
          [](const PyCausalLM& s) {
            py::list out;
            for (const auto& b : s.model->blocks)
              out.append(py::cast(std::shared_ptr<nn::TransformerBlock<float>>(s.model, b.get())));
            return out;
          },
          "The blocks, as TransformerBlock modules sharing the model's parameters.");
}

// attograd.Task: a config's task, its training batches and held-out set.
void bind_task(py::module_& m) {
  py::class_<PyTask>(
      m, "Task",
      "A config's task: Task(config). batch(step) draws the trainer's batches in order; heldout(n) "
      "is attograd eval's held-out set.")
      .def(py::init([](py::handle config) {
             auto out = std::make_unique<PyTask>(PyTask{read_config(config, {}), nullptr, ag::Rng(0), 0});
             out->task = std::shared_ptr<train::Task>(train::make_task(out->config.task, out->config.seed));
             out->rng = train::data_rng(out->config);
             return out;
           }),
           py::arg("config"))
      .def(
          "batch",
          [](PyTask& s, py::handle step_value) {
            const int64_t step = step_value.is_none() ? s.next_step : int_of(step_value, "step");
            if (step != s.next_step)
              throw std::invalid_argument("step: the data stream is drawn in order, expected step " +
                                          std::to_string(s.next_step) + ", got " + std::to_string(step));
            train::Batch b;
            {
              py::gil_scoped_release release;
              b = s.task->training_batch(step, s.config.train.batch_size, s.rng);
            }
            ++s.next_step;
            return batch_of(b);
          },
          py::arg("step") = py::none(),
          "The trainer's batch of 0-based step `step` (the next one: steps are drawn in order), as "
          "run.sample's "
          "dict: ids, targets (-1 where not scored), scored, is_padding, each (B, T).")
      .def(
          "heldout",
          [](const PyTask& s, py::handle n_value) {
            const int64_t n = n_value.is_none() ? s.config.train.eval_size : size_of(n_value, "n", 1 << 20);
            train::Batch b;
            {
              py::gil_scoped_release release;
              b = s.task->eval_set(s.config.seed, static_cast<int>(n));
            }
            return batch_of(b);
          },
          py::arg("n") = py::none(), "attograd eval's held-out set (n sequences, None: train.eval_size).")
      .def_property_readonly("vocab_size", [](const PyTask& s) { return s.task->vocab_size(); })
      .def_property_readonly("seq_len", [](const PyTask& s) { return s.task->seq_len(); })
      .def_property_readonly("config",
                             [](const PyTask& s) { return json_to_python(train::to_json(s.config)); });
}

// attograd.optim's classes: the Optimizer base, AdamW and Muon.
void bind_optimizers(py::module_& optim) {
  py::class_<PyOptimizer> base(optim, "Optimizer", "The base of AdamW and Muon.");
  py::class_<PyAdamW, PyOptimizer> opt(
      optim, "AdamW",
      "AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, "
      "decay=\"weights\"): the trainer's AdamW (train/optimizer.h). params: a module, a "
      "Tensor or a list of them; decay \"weights\" decays weight matrices only.");
  opt.def(py::init([](py::handle params, py::handle lr, py::handle betas, py::handle eps, py::handle wd,
                      const std::string& decay) {
            return make_optimizer<PyAdamW>(params, finite_in(lr, "lr", 0, 1e3), betas,
                                           finite_in(eps, "eps", 0, 1), finite_in(wd, "weight_decay", 0, 1e3),
                                           decay, false, 0);
          }),
          py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = py::make_tuple(0.9, 0.999),
          py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01, py::arg("decay") = "weights");
  py::class_<PyMuon, PyOptimizer> muon(
      optim, "Muon",
      "Muon(params, lr=1e-3, muon_lr=0.02, betas=(0.9, 0.999), eps=1e-8, "
      "weight_decay=0.01, decay=\"weights\"): Muon for the blocks' weight matrices at "
      "muon_lr, AdamW at lr for the rest (train.optimizer \"muon\").");
  muon.def(py::init([](py::handle params, py::handle lr, py::handle muon_lr, py::handle betas, py::handle eps,
                       py::handle wd, const std::string& decay) {
             return make_optimizer<PyMuon>(params, finite_in(lr, "lr", 0, 1e3), betas,
                                           finite_in(eps, "eps", 0, 1), finite_in(wd, "weight_decay", 0, 1e3),
                                           decay, true, finite_in(muon_lr, "muon_lr", 0, 1e3));
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("muon_lr") = 0.02,
           py::arg("betas") = py::make_tuple(0.9, 0.999), py::arg("eps") = 1e-8,
           py::arg("weight_decay") = 0.01, py::arg("decay") = "weights");
  {
    base.def(
            "zero_grad",
            [](PyOptimizer& o) {
              for (Tensor& t : o.tensors) t.zero_grad();
            },
            "Clears every parameter's gradient.")
        .def(
            "step",
            [](PyOptimizer& o) {
              py::gil_scoped_release release;
              o.adamw->step(o.lr, 1.0f, o.muon_lr);
            },
            "One update from the parameters' gradients (a parameter without one is left as it is).")
        .def(
            "clip_grad_norm",
            [](PyOptimizer& o, py::handle max_norm) {
              const double limit = finite_in(max_norm, "max_norm", 0, 1e30);
              return train::clip_grad_norm(o.params, limit);
            },
            py::arg("max_norm"),
            "The global L2 norm of the gradients (computed in float64), then every gradient scaled by "
            "max_norm / norm when above max_norm (0: never). Returns the norm before clipping.")
        .def_property(
            "lr", [](const PyOptimizer& o) { return o.lr; },
            [](PyOptimizer& o, py::handle v) { o.lr = finite_in(v, "lr", 0, 1e3); },
            "The learning rate of the next step.")
        .def_property(
            "muon_lr", [](const PyOptimizer& o) { return o.muon_lr; },
            [](PyOptimizer& o, py::handle v) { o.muon_lr = finite_in(v, "muon_lr", 0, 1e3); },
            "Muon's learning rate (unused by AdamW).")
        .def_property_readonly("steps_taken", [](const PyOptimizer& o) { return o.adamw->steps_taken(); })
        .def_property_readonly("param_names",
                               [](const PyOptimizer& o) {
                                 std::vector<std::string> names;
                                 for (const auto& p : o.params) names.push_back(p.name);
                                 return names;
                               })
        .def(
            "state_dict",
            [](PyOptimizer& o) {
              py::dict out;
              py::list m, v;
              for (size_t i = 0; i < o.params.size(); ++i) {
                m.append(py::array_t<float>(static_cast<py::ssize_t>(o.adamw->first_moments()[i].size()),
                                            o.adamw->first_moments()[i].data()));
                v.append(py::array_t<float>(static_cast<py::ssize_t>(o.adamw->second_moments()[i].size()),
                                            o.adamw->second_moments()[i].data()));
              }
              out["step"] = o.adamw->steps_taken();
              out["m"] = m;
              out["v"] = v;
              out["lr"] = o.lr;
              out["muon_lr"] = o.muon_lr;
              return out;
            },
            "{\"step\", \"m\", \"v\", \"lr\", \"muon_lr\"}: the moments (one flat float32 array per "
            "parameter), "
            "a copy.")
        .def(
            "load_state_dict",
            [](PyOptimizer& o, py::handle state) {
              if (!py::isinstance<py::dict>(state))
                throw py::type_error("state_dict: expected a dict from state_dict(), got " +
                                     type_name(state));
              const py::dict d = py::reinterpret_borrow<py::dict>(state);
              for (const char* key : {"step", "m", "v", "lr", "muon_lr"})
                if (!d.contains(key))
                  throw std::invalid_argument(std::string("state_dict: missing '") + key + "'");
              const int64_t step = int_of(d["step"], "state_dict[step]");
              if (step < 0) throw std::invalid_argument("state_dict[step]: expected a non-negative int");
              std::vector<std::vector<float>> m, v;
              for (const char* key : {"m", "v"}) {
                const py::object list = d[key];
                if (!py::isinstance<py::list>(list) || py::len(list) != o.params.size())
                  throw std::invalid_argument(std::string("state_dict[") + key + "]: expected a list of " +
                                              std::to_string(o.params.size()) + " arrays");
                for (size_t i = 0; i < o.params.size(); ++i) {
                  const std::vector<int64_t> shape = {o.params[i].tensor->numel()};
                  (key[0] == 'm' ? m : v)
                      .push_back(tensor_from_array<float>(
                                     list[py::int_(i)],
                                     std::string("state_dict[") + key + "][" + std::to_string(i) + "]",
                                     &shape)
                                     .to_vector());
                }
              }
              const double lr = finite_in(d["lr"], "state_dict[lr]", 0, 1e3);
              const double muon_lr = finite_in(d["muon_lr"], "state_dict[muon_lr]", 0, 1e3);
              o.adamw->first_moments() = std::move(m);
              o.adamw->second_moments() = std::move(v);
              o.adamw->set_steps_taken(step);
              o.lr = lr;
              o.muon_lr = muon_lr;
            },
            py::arg("state_dict"), "Restores what state_dict() gave (each moment's size checked first).");
  }
}

// attograd.optim's functions: from_config and learning_rate.
void bind_optim_functions(py::module_& optim) {
  optim.def(
      "from_config",
      [](py::handle model, py::handle config) {
        const train::Config c = read_config(config, {});
        const bool muon = c.train.optimizer == "muon";
        const py::tuple betas = py::make_tuple(c.train.betas[0], c.train.betas[1]);
        if (muon)
          return py::cast(make_optimizer<PyMuon>(model, c.train.lr, betas, 1e-8, c.train.weight_decay,
                                                 c.train.decay, true, c.train.muon_lr));
        return py::cast(make_optimizer<PyAdamW>(model, c.train.lr, betas, 1e-8, c.train.weight_decay,
                                                c.train.decay, false, 0));
      },
      py::arg("model"), py::arg("config"),
      "The optimiser a config's train section gives the trainer (AdamW, or Muon with train.optimizer "
      "\"muon\"), over model's parameters.");
  optim.def(
      "learning_rate",
      [](py::handle config, py::handle step) {
        const train::Config c = read_config(config, {});
        const int64_t s = int_of(step, "step");
        if (s < 0) throw std::invalid_argument("step: expected a non-negative int, got " + std::to_string(s));
        return train::learning_rate(c.train, s);
      },
      py::arg("config"), py::arg("step"),
      "The trainer's learning rate at 0-based step `step` (train.warmup, train.schedule): for AdamW's lr; "
      "Muon's is this times train.muon_lr / train.lr.");
}

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nnm =
      m.def_submodule("nn", "Modules of the engine: the layers attograd's models are built from.");
  py::module_ optim = m.def_submodule("optim", "Optimisers: AdamW and Muon as the trainer steps them.");
  // In this order: a class is registered before the classes and signatures that name it.
  bind_modules(nnm);
  bind_causal_lm(nnm);
  bind_task(m);
  bind_optimizers(optim);
  bind_optim_functions(optim);
}

}  // namespace pyag
