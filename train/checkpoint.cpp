#include "train/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/run_layout.h"
#include "train/config_tables.h"
#include "train/safetensors.h"

namespace train {

namespace {

NamedArray array_of(const std::string& name, const ag::Shape& shape, const std::vector<float>& data) {
  return NamedArray{name, shape, data};
}

// Steps count up to train.steps, an int.
int64_t parse_step(const SafetensorsFile& f, const std::string& path) {
  const uint64_t step = metadata_u64(f, "step", path);
  if (step > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    throw std::runtime_error(path + ": step " + std::to_string(step) + " is beyond any train.steps (" +
                             std::to_string(std::numeric_limits<int>::max()) + ") (__metadata__/step)");
  return static_cast<int64_t>(step);
}

// The model the config describes must be the tensors the file holds: comparing their total size before the
// model is built keeps a small file whose config claims a huge model from allocating it.
void check_tensor_table(const SafetensorsFile& f, const Config& config, const std::string& path) {
  double values = 0;
  for (const NamedArray& t : f.tensors) {
    double n = 1;
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    values += n;
  }
  const double expected = parameter_count(config.model);
  if (values != expected) {
    char text[64];
    std::snprintf(text, sizeof text, "%.0f values but its config's model has %.0f parameters", values,
                  expected);
    throw std::runtime_error(path + ": the tensors hold " + text + " (tensor table)");
  }
}

}  // namespace

void save_checkpoint(const std::string& run_dir, const Config& config, const nn::CausalLM<float>& model,
                     AdamW& optimizer, const ag::Rng& data_rng, int64_t step) {
  std::filesystem::create_directories(io::layout::checkpoint_dir(run_dir));
  std::vector<NamedArray> state;
  const auto& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    state.push_back(array_of("m." + params[i].name, params[i].tensor->shape(), optimizer.first_moments()[i]));
    state.push_back(
        array_of("v." + params[i].name, params[i].tensor->shape(), optimizer.second_moments()[i]));
  }
  const ag::Rng::State rs = data_rng.state();
  std::map<std::string, std::string> meta{
      {"step", u64_to_metadata(static_cast<uint64_t>(step))},
      {"adam_steps", u64_to_metadata(static_cast<uint64_t>(optimizer.steps_taken()))},
      {"rng_cached_normal", f64_bits_to_metadata(rs.cached_normal)},
      {"rng_has_cached_normal", rs.has_cached_normal ? "1" : "0"}};
  for (int i = 0; i < 4; ++i) meta["rng_s" + std::to_string(i)] = u64_to_metadata(rs.s[i]);
  const std::string optimizer_path = io::layout::optimizer_checkpoint(run_dir, step);
  write_safetensors(optimizer_path, state, meta);

  std::vector<NamedArray> tensors;
  for (const auto& p : model.named_parameters())
    tensors.push_back(array_of(p.name, p.tensor->shape(), p.tensor->to_vector()));
  write_safetensors(
      io::layout::model_checkpoint(run_dir), tensors,
      {{"config", to_json(config).dump()}, {"step", u64_to_metadata(static_cast<uint64_t>(step))}});
  // The model file now names `step`: older optimiser files belong to no checkpoint any more.
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(io::layout::checkpoint_dir(run_dir), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(io::layout::optimizer_checkpoint_prefix, 0) == 0 &&
        entry.path().string() != optimizer_path && !io::layout::is_temp_file(name))
      fs::remove(entry.path(), ec);
  }
}

void save_model_run(const std::string& run_dir, Config config, const nn::CausalLM<float>& model,
                    int64_t step) {
  namespace fs = std::filesystem;
  if (fs::exists(io::layout::model_checkpoint(run_dir)))
    throw std::invalid_argument("path: " + run_dir +
                                " already holds a run (checkpoint/model.safetensors); give a new folder");
  fs::create_directories(io::layout::checkpoint_dir(run_dir));
  config.output.dir = run_dir;
  std::vector<OptimParam> params;
  for (const auto& p : model.named_parameters()) params.push_back({p.name, p.tensor, false});
  AdamW fresh(params, 0.0);  // zero moments; it only writes them
  io::write_text_file_atomically(io::layout::config_json(run_dir), to_json(config).dump(2) + "\n");
  save_checkpoint(run_dir, config, model, fresh, ag::Rng(static_cast<uint64_t>(config.seed)), step);
}

int64_t load_model_checkpoint(const std::string& path, nn::CausalLM<float>& model) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  std::map<std::string, float*> destination;
  for (const auto& p : model.named_parameters()) {
    expected.push_back({p.name, p.tensor->shape()});
    destination[p.name] = p.tensor->data();
  }
  // Each tensor is read straight into its parameter (the model is the caller's fresh one: a refused file
  // leaves it half written, never a model in use).
  const SafetensorsFile f = read_safetensors_into(
      path, [&](const SafetensorsFile& header) { expect_tensors(header, expected, path); },
      [&](const NamedArray& t) { return destination.at(t.name); });
  for (const auto& p : model.named_parameters())
    for (const float x : p.tensor->values())
      if (!(std::fabs(x) <= kMaxWeightMagnitude)) {
        char value[32], bound[32];
        std::snprintf(value, sizeof value, "%g", static_cast<double>(x));
        std::snprintf(bound, sizeof bound, "%g", kMaxWeightMagnitude);
        throw std::runtime_error(
            path + ": tensor " + p.name + " holds " + value +
            (std::isfinite(x) ? std::string(", beyond the bound of ") + bound + " on a weight's magnitude"
                              : std::string(", expected finite weights")));
      }
  return parse_step(f, path);
}

void init_from_run(const Config& config, nn::CausalLM<float>& model) {
  namespace fs = std::filesystem;
  const std::string& run = config.model.init_from;
  const std::string label = "model.init_from " + run;
  if (!fs::is_directory(run))
    throw std::invalid_argument(label +
                                ": not a folder (expected a run folder: `attograd import`'s or a "
                                "training run's)");
  const std::string config_path = io::layout::config_json(run);
  const std::string checkpoint_path = io::layout::model_checkpoint(run);
  for (const std::string& file : {config_path, checkpoint_path})
    if (!fs::is_regular_file(file))
      throw std::invalid_argument(label + ": no " + file + " (not a run folder)");
  const nlohmann::json document = io::load_json_file(config_path);
  ModelConfig theirs;
  try {
    io::Section(document, "").section("model").read_fields(model_fields(), theirs);
  } catch (const io::FieldProblem& problem) {
    throw io::field_error(config_path, problem);
  }
  const nlohmann::json mine_json = io::fields_to_json(model_fields(), config.model);
  const nlohmann::json theirs_json = io::fields_to_json(model_fields(), theirs);
  for (const auto& item : mine_json.items()) {
    if (item.key() == "init_from" || item.value() == theirs_json.at(item.key())) continue;
    throw std::invalid_argument(label + ": model." + item.key() + " is " + item.value().dump() +
                                " here but " + theirs_json.at(item.key()).dump() + " in " + config_path +
                                " (the model sections must agree)");
  }
  load_model_checkpoint(checkpoint_path, model);
}

int64_t step_from_checkpoint(const std::string& path) {
  return parse_step(read_safetensors_header(path), path);
}

Config config_from_checkpoint(const std::string& path) {
  const SafetensorsFile f = read_safetensors_header(path);
  const std::string& text = metadata_string(f, "config", path);
  nlohmann::json j;
  try {
    j = io::parse_json_text(text, path + " (__metadata__/config)");
  } catch (const io::JsonError&) {
    throw std::runtime_error(path + ": __metadata__/config is not JSON");
  }
  const Config config = from_json(j, path + " (__metadata__/config)");
  check_tensor_table(f, config, path);
  return config;
}

void load_optimizer_checkpoint(const std::string& path, AdamW& optimizer, ag::Rng& data_rng,
                               int64_t expected_step) {
  const SafetensorsFile f = read_safetensors(path);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& p : optimizer.params()) {
    expected.push_back({"m." + p.name, p.tensor->shape()});
    expected.push_back({"v." + p.name, p.tensor->shape()});
  }
  expect_tensors(f, expected, path);
  const int64_t step = parse_step(f, path);
  if (step != expected_step)
    throw std::runtime_error(path + ": optimiser state is for step " + std::to_string(step) +
                             " but the model is at step " + std::to_string(expected_step) +
                             " (__metadata__/step)");
  // AdamW steps once per training step, so its count cannot pass the step (and its bias correction would
  // overflow or divide by zero on absurd counts).
  const uint64_t adam_steps = metadata_u64(f, "adam_steps", path);
  if (adam_steps > static_cast<uint64_t>(step))
    throw std::runtime_error(path + ": adam_steps " + std::to_string(adam_steps) + " is more than the step " +
                             std::to_string(step) + " (__metadata__/adam_steps)");
  ag::Rng::State rs;
  for (int i = 0; i < 4; ++i) rs.s[i] = metadata_u64(f, "rng_s" + std::to_string(i), path);
  // xoshiro256's all-zero state is a fixed point: the generator would return 0 forever.
  if (rs.s[0] == 0 && rs.s[1] == 0 && rs.s[2] == 0 && rs.s[3] == 0)
    throw std::runtime_error(path + ": the data generator's state is all zero (__metadata__/rng_s0..3)");
  rs.cached_normal = metadata_f64_bits(f, "rng_cached_normal", path);
  const std::string& has_cached = metadata_string(f, "rng_has_cached_normal", path);
  if (has_cached != "0" && has_cached != "1")
    throw std::runtime_error(path + ": expected \"0\" or \"1\" (__metadata__/rng_has_cached_normal)");
  rs.has_cached_normal = has_cached == "1";
  if (rs.has_cached_normal && !std::isfinite(rs.cached_normal))
    throw std::runtime_error(path + ": the cached normal is not finite (__metadata__/rng_cached_normal)");
  const auto& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    for (float x : f.find("m." + params[i].name)->data)
      if (!std::isfinite(x))
        throw std::runtime_error(path + ": a first moment is not finite (m." + params[i].name + ")");
    for (float x : f.find("v." + params[i].name)->data)
      if (!(x >= 0 && std::isfinite(x)))
        throw std::runtime_error(path + ": a second moment is negative or not finite (v." + params[i].name +
                                 ")");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    optimizer.first_moments()[i] = f.find("m." + params[i].name)->data;
    optimizer.second_moments()[i] = f.find("v." + params[i].name)->data;
  }
  optimizer.set_steps_taken(static_cast<int64_t>(adam_steps));
  data_rng.set_state(rs);
}

}  // namespace train
