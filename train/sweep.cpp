// Sweep files (sweep.h): parse, check the grid's shape, expand the product, and validate every run through
// the same path as `attograd train BASE --set ...` (from_json with overrides).
#include "train/sweep.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "io/atomic_file.h"
#include "io/field_table.h"
#include "io/json_read.h"
#include "io/printable.h"
#include "io/run_layout.h"

namespace train {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& source, const std::string& pointer, const std::string& what) {
  throw ConfigError(source + ": " + (pointer.empty() ? "/" : pointer) + ": " + what);
}

std::string kind_of(const ordered_json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  return v.dump();
}

// A value as it appears in a run's folder name: strings without quotes, anything a file name or a shell
// would trip on replaced by '-'.
std::string name_part(const ordered_json& value) {
  const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  std::string out;
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '+' || c == '-';
    out += plain ? c : '-';
  }
  if (out.empty() || out == "." || out == "..") out = "-";
  return out;
}

bool is_key_path(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

// The short name of each grid key: its last segment ("model.d_model" -> "d_model"), or the whole key when
// two keys share a last segment (task.vocab and model.vocab).
std::vector<std::string> short_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> last;
  for (const std::string& k : keys) last.push_back(k.substr(k.rfind('.') + 1));
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t same = 0;
    for (const std::string& l : last) same += l == last[i];
    out.push_back(same > 1 ? keys[i] : last[i]);
  }
  return out;
}

// A sweep file's fields but its grid, which the code reads in the file's key order.
struct SweepFile {
  std::string base;
  std::optional<std::string> out;
};

const io::Table<SweepFile>& sweep_file_fields() {
  static const io::Table<SweepFile> fields = {
      {"base", &SweepFile::base, "the config file every run starts from", io::not_empty()},
      {"out", &SweepFile::out, "the sweep's folder, one run folder in it per point of the grid",
       io::not_empty(), io::kFixed, "\"runs/\" + the sweep file's name without .json"},
  };
  return fields;
}

// "key=value" for --set: the value as JSON, which --set parses back to the same value.
std::string override_text(const std::string& key, const ordered_json& value) {
  return key + "=" + value.dump();
}

}  // namespace

Sweep load_sweep(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(path + ": is a folder, expected a sweep file");
  std::string text;
  try {
    text = io::read_text_file(path, kMaxSweepFileBytes, "sweep file");
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
  // The one bounded reader (io/json_read.h), keeping the file's key order, which the grid's expansion
  // follows: line and column, nesting, NUL bytes, numbers out of range and duplicate keys.
  ordered_json doc;
  try {
    doc = io::parse_ordered_json_text(text, path);
  } catch (const io::JsonError& e) {
    throw ConfigError(e.what());
  }
  // base and out through the file's table; the grid (an object of arrays, in the file's order) below.
  SweepFile file;
  try {
    io::Section(json(doc), "").read_fields(sweep_file_fields(), file, {"grid"});
  } catch (const io::FieldProblem& problem) {
    throw ConfigError(io::field_error(path, problem).what());
  }
  Sweep sweep;
  sweep.source = path;
  sweep.base = file.base;
  // The folder goes into every run's output.dir, which holds printable UTF-8 only (as every table string).
  sweep.out = file.out ? *file.out : "runs/" + std::filesystem::path(path).stem().string();
  if (!io::is_printable_utf8(sweep.out))
    fail(path, "/out", "expected UTF-8 text without control bytes, got " + io::printable(sweep.out));
  if (std::filesystem::exists(sweep.out, ec) && !std::filesystem::is_directory(sweep.out, ec))
    fail(path, "/out", sweep.out + " is a file, expected a folder (or a path that does not exist yet)");

  if (!doc.contains("grid") || !doc["grid"].is_object())
    fail(path, "/grid", "expected an object of key.path: [values]");
  sweep.grid = doc["grid"];
  if (sweep.grid.empty()) fail(path, "/grid", "empty grid: name at least one key.path with its values");
  std::vector<std::string> keys;
  int64_t count = 1;
  for (const auto& item : sweep.grid.items()) {
    const std::string pointer = "/grid/" + io::printable(item.key());
    // A key names a config field (checked with each run's --set below); it also becomes part of the run
    // folders' names and of error lines, so anything but a plain key path is refused here.
    if (!is_key_path(item.key()))
      fail(path, pointer, "expected a config key path such as model.d_model (letters, digits, _ and .)");
    if (item.key() == "output.dir" || item.key() == "output")
      fail(path, pointer, "the sweep sets each run's output.dir (out/NAME); use \"out\" for the folder");
    const auto sets_threads = [&] {
      if (item.key() == "train.threads") return true;
      if (item.key() != "train" || !item.value().is_array()) return false;
      for (const ordered_json& v : item.value())
        if (v.is_object() && v.contains("threads")) return true;
      return false;
    };
    if (sets_threads())
      fail(path, pointer, "the sweep sets each run's train.threads (cores / -j); it changes no result");
    if (!item.value().is_array())
      fail(path, pointer, "expected an array of values, got " + kind_of(item.value()));
    if (item.value().empty()) fail(path, pointer, "empty list of values");
    std::set<std::string> seen;
    for (size_t i = 0; i < item.value().size(); ++i)
      if (!seen.insert(item.value()[i].dump()).second)
        fail(path, pointer + "/" + std::to_string(i), "duplicate value " + item.value()[i].dump());
    keys.push_back(item.key());
    count *= static_cast<int64_t>(item.value().size());
    if (count > kMaxSweepRuns)
      fail(path, "/grid",
           "more than " + std::to_string(kMaxSweepRuns) + " runs in the grid's product (split the sweep)");
  }

  // The base config alone first, so that its own errors name it rather than a run.
  json base_document;
  try {
    (void)load_config(sweep.base);
    base_document = io::load_json_file(sweep.base);
  } catch (const std::exception& e) {
    throw ConfigError(path + ": /base: " + e.what());
  }

  const std::vector<std::string> shorts = short_keys(keys);
  std::set<std::string> names;
  std::vector<size_t> index(keys.size(), 0);
  for (int64_t r = 0; r < count; ++r) {
    SweepRun run;
    run.settings = ordered_json::object();
    for (size_t k = 0; k < keys.size(); ++k) {
      const ordered_json& value = sweep.grid[keys[k]][index[k]];
      run.settings[keys[k]] = value;
      run.overrides.push_back(override_text(keys[k], value));
      // A key with one value is the same for every run: it names none of them (unless every key is so).
      if (sweep.grid[keys[k]].size() > 1 || count == 1)
        run.name += (run.name.empty() ? "" : ",") + shorts[k] + "=" + name_part(value);
    }
    if (run.name.size() > 200) run.name = "run-" + std::to_string(r);
    const std::string unique = run.name;
    for (int n = 2; !names.insert(run.name).second; ++n) run.name = unique + "-" + std::to_string(n);
    try {
      run.config = from_json(base_document, sweep.base, run.overrides);
    } catch (const ConfigError& e) {
      throw ConfigError(path + ": run " + run.name + ": " + e.what());
    }
    run.config.output.dir = io::layout::sweep_run(sweep.out, run.name);
    sweep.runs.push_back(std::move(run));
    // The next point of the product: the last key varies fastest.
    for (size_t k = keys.size(); k-- > 0;) {
      if (++index[k] < sweep.grid[keys[k]].size()) break;
      index[k] = 0;
    }
  }
  return sweep;
}

nlohmann::ordered_json sweep_manifest(const Sweep& sweep) {
  ordered_json runs = ordered_json::array();
  for (const SweepRun& r : sweep.runs)
    runs.push_back({{"name", r.name}, {"settings", r.settings}, {"overrides", r.overrides}});
  return {{"sweep", sweep.source},
          {"base", sweep.base},
          {"out", sweep.out},
          {"grid", sweep.grid},
          {"runs", std::move(runs)}};
}

bool same_run_config(const Config& a, const Config& b) {
  Config x = a, y = b;
  x.output.dir = y.output.dir;
  x.train.threads = y.train.threads;
  return x == y;
}

}  // namespace train
